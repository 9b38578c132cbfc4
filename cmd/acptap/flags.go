package main

import (
	"fmt"
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

// The --store help of each command says what it does with the store:
// read a store file or a directory of exported recordings (show, replay,
// calibrate, diff), write into a store it creates if missing (record,
// import), or use a store file that exists (the others).
const (
	storeReadUsage   = "the store `PATH`: a store file, or a directory of exported recordings (acptap export); $ACPTAP_STORE sets the default"
	storeCreateUsage = "the store `PATH`: a store file, created if missing; $ACPTAP_STORE sets the default"
	storeFileUsage   = "the store `PATH`: a store file; $ACPTAP_STORE sets the default"
)

// storeFlag is --store, with usage (one of the above). ACPTAP_STORE is
// read here rather than by urfave/cli, which would take an empty
// ACPTAP_STORE= for the path "": an empty variable is an unset one, while
// an empty --store "" is an error (see checkStore).
func storeFlag(usage string) cli.Flag {
	value := defaultStore
	if env := os.Getenv("ACPTAP_STORE"); env != "" {
		value = env
	}
	return &cli.StringFlag{
		Name:        "store",
		Usage:       usage,
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
		Usage:   "the `DIR` of the interception CA, created on first use",
		// proxy.DefaultCADir, under os.UserConfigDir.
		DefaultText: "acptap in the user's config directory, ~/.config/acptap on Linux",
	}
}

// caMismatchFix is what to do about a --ca-dir whose certificate is not
// its key's.
const caMismatchFix = "put back the certificate of that key, or remove both files for a new CA (which clients must then trust again), or pass another --ca-dir"

func graceFlag() cli.Flag {
	return &cli.DurationFlag{
		Name:  "grace",
		Value: stdiotap.DefaultGrace,
		Usage: "after the agent's stdin closes, the `DURATION` it may take to exit before it is terminated",
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
	return sizeText(v.n)
}

// sizeText writes n as the size flags take it, without a space: 64MiB,
// 512KiB, 1GiB, or bytes when no unit divides it. Help writes every size
// this way, so that each can be copied into a flag.
func sizeText(n int64) string {
	for _, u := range []struct {
		name string
		size int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if n >= u.size && n%u.size == 0 {
			return fmt.Sprintf("%d%s", n/u.size, u.name)
		}
	}
	return fmt.Sprint(n)
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
