package main

import (
	"os"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/acptap/acptap/internal/bytesize"
	"github.com/acptap/acptap/stdiotap"
)

// The flags that several commands take are made here, once, with one
// name, help text and default, and checked by one function.

// defaultStore is the store of a command given neither --store nor
// ACPTAP_STORE.
const defaultStore = "acptap.db"

// storeFlag is --store. ACPTAP_STORE is read here rather than by
// urfave/cli, which would take an empty ACPTAP_STORE= for the path "": an
// empty variable is an unset one, while an empty --store "" is an error
// (see checkStore).
func storeFlag() cli.Flag {
	value := defaultStore
	if env := os.Getenv("ACPTAP_STORE"); env != "" {
		value = env
	}
	return &cli.StringFlag{
		Name:        "store",
		Usage:       "the store `PATH`: a bbolt file; show, replay and calibrate also read a directory of exported recordings (acptap export); default $ACPTAP_STORE, else acptap.db",
		Value:       value,
		DefaultText: value,
	}
}

// checkStore refuses an empty --store, for every command that has one.
func checkStore(c *cli.Context) error {
	if c.IsSet("store") && c.String("store") == "" {
		return usageErrorf("--store is empty; pass the path of a store file, or leave --store out for %s", defaultStore)
	}
	return nil
}

func caDirFlag() cli.Flag {
	return &cli.StringFlag{
		Name:    "ca-dir",
		EnvVars: []string{"ACPTAP_CA_DIR"},
		Usage:   "`DIR` of the interception CA (created on first use; default ~/.config/acptap)",
	}
}

// caMismatchFix is what to do about a --ca-dir whose certificate is not
// its key's.
const caMismatchFix = "put back the certificate of that key, or remove both files for a new CA (which clients must then trust again), or pass another --ca-dir"

func graceFlag() cli.Flag {
	return &cli.DurationFlag{
		Name:  "grace",
		Value: stdiotap.DefaultGrace,
		Usage: "after the agent's stdin closes, how long it may take to exit before it is terminated",
	}
}

func proxyLoopbackFlag() cli.Flag {
	return &cli.BoolFlag{
		Name:  "proxy-loopback",
		Usage: "send the agent's loopback destinations (localhost, 127.0.0.1, ::1) through the tap too, for a local LLM reached by the proxy; by default NO_PROXY names them",
	}
}

// positiveDuration returns the value of the duration flag name, refusing
// zero and negative values the same way for every command.
func positiveDuration(c *cli.Context, name string) (time.Duration, error) {
	d := c.Duration(name)
	if d <= 0 {
		return 0, usageErrorf("--%s must be positive, got %v", name, d)
	}
	return d, nil
}

// sizeValue is a size flag: bytes, or a number with a unit (64MiB, 512K,
// 1.5GB).
type sizeValue struct{ n int64 }

func (v *sizeValue) String() string {
	if v == nil {
		return ""
	}
	return bytesize.Format(v.n)
}

func (v *sizeValue) Set(s string) error {
	n, err := bytesize.Parse(s)
	if err != nil {
		return err
	}
	v.n = n
	return nil
}

// noArgsBeforeAgent refuses positional arguments of a command that takes
// only flags before "--".
func noArgsBeforeAgent(c *cli.Context, usage string) error {
	if c.NArg() > 0 {
		return usageErrorf("unexpected argument %q before --; usage: %s", c.Args().First(), usage)
	}
	return nil
}

// agentAfterDashDash returns the agent command given after "--", refusing
// a "--" with nothing after it.
func agentAfterDashDash(stdio *IO, usage string) ([]string, error) {
	if stdio.dashDash && len(stdio.agentArgv) == 0 {
		return nil, usageErrorf("no agent command after --; usage: %s", usage)
	}
	return stdio.agentArgv, nil
}
