package record

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/acptap/acptap/store"
)

func TestParseTCPLine(t *testing.T) {
	for _, c := range []struct {
		line                string
		local, remote       string
		lport, rport, state int
		inode               uint64
	}{
		{"   0: 0100007F:1F90 0100007F:C350 01 00000000:00000000 00:00000000 00000000  1000        0 123456 1 0000000000000000 20 4 30 10 -1",
			"127.0.0.1", "127.0.0.1", 8080, 50000, 1, 123456},
		{"   1: 00000000:0BB8 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 777 1 0000000000000000 100 0 0 10 0",
			"0.0.0.0", "0.0.0.0", 3000, 0, tcpListen, 777},
		{"   2: 00000000000000000000000001000000:2CAA 00000000000000000000000001000000:D431 01 00000000:00000000 00:00000000 00000000  1000        0 42 1 0000000000000000 20 4 30 10 -1",
			"::1", "::1", 11434, 54321, 1, 42},
		{"   3: 0000000000000000FFFF00000100007F:1F90 0000000000000000FFFF00000100007F:C350 01 00000000:00000000 00:00000000 00000000  1000        0 43 1 0000000000000000 20 4 30 10 -1",
			"127.0.0.1", "127.0.0.1", 8080, 50000, 1, 43},
		{"   4: 0A01A8C0:D431 2214D9AC:01BB 01 00000000:00000000 00:00000000 00000000  1000        0 44 1 0000000000000000 20 4 30 10 -1",
			"192.168.1.10", "172.217.20.34", 54321, 443, 1, 44},
	} {
		e, ok := parseTCPLine([]byte(c.line))
		if !ok {
			t.Errorf("parseTCPLine(%q) failed", c.line)
			continue
		}
		if e.local.ip.String() != c.local || e.remote.ip.String() != c.remote || e.local.port != c.lport || e.remote.port != c.rport || e.state != c.state || e.inode != c.inode {
			t.Errorf("parseTCPLine(%q) = %v:%d %v:%d st %d inode %d", c.line, e.local.ip, e.local.port, e.remote.ip, e.remote.port, e.state, e.inode)
		}
	}
	for _, bad := range []string{"", "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode", "0: 0100007F 0100007F:C350 01 0 0 0 0 0 1"} {
		if _, ok := parseTCPLine([]byte(bad)); ok {
			t.Errorf("parseTCPLine(%q) succeeded", bad)
		}
	}
}

// loopbackModeEnv makes the test binary a loopbackClient, before the
// tests' TestMain (record_test's) runs.
const loopbackModeEnv = "RECORD_TEST_LOOPBACK"

func init() {
	if os.Getenv(loopbackModeEnv) != "" {
		os.Exit(loopbackClient())
	}
}

// dialEnv holds the addresses a loopbackClient connects to,
// childDialEnv those its child does, and strayDialEnv those of a
// grandchild whose parent ends, a stray of the group.
const (
	dialEnv      = "RECORD_TEST_DIAL"
	childDialEnv = "RECORD_TEST_CHILD_DIAL"
	strayDialEnv = "RECORD_TEST_STRAY_DIAL"
	spawnEnv     = "RECORD_TEST_SPAWN" // start a loopbackClient, relay its line, and end
)

// loopbackClient runs a server of its own on loopback and connects to it
// and to the addresses of $RECORD_TEST_DIAL. With $RECORD_TEST_CHILD_DIAL
// it starts itself again, in its process group, to connect to those; with
// $RECORD_TEST_STRAY_DIAL it does so by a child that ends once its own
// has connected, which leaves that one a stray. Once all is connected it
// prints the ports of its own servers and its children's, and holds the
// connections until its stdin ends.
func loopbackClient() int {
	if os.Getenv(spawnEnv) != "" {
		// The spawner: its child keeps the spawner's stdin, and runs on.
		ports, _, err := startClient(os.Getenv(dialEnv), os.Stdin)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
		fmt.Println(strings.Join(ports, " "))
		return 0
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	addrs := []string{ln.Addr().String()}
	if d := os.Getenv(dialEnv); d != "" {
		addrs = append(addrs, strings.Split(d, ",")...)
	}
	for _, a := range addrs {
		c, err := net.Dial("tcp", a)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
		defer c.Close()
	}
	_, own, _ := net.SplitHostPort(ln.Addr().String())
	ports := []string{own}
	if d := os.Getenv(childDialEnv); d != "" {
		// The child ends with this one's stdin.
		more, child, err := startClient(d, os.Stdin)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
		defer child.Wait()
		ports = append(ports, more...)
	}
	if d := os.Getenv(strayDialEnv); d != "" {
		more, spawner, err := startClient(d, os.Stdin, spawnEnv+"=1")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
		spawner.Wait() // its child is a stray from now on
		ports = append(ports, more...)
	}
	fmt.Println(strings.Join(ports, " "))
	io.Copy(io.Discard, os.Stdin)
	return 0
}

// startClient starts a loopbackClient that dials addrs, on stdin, and
// returns the ports it printed.
func startClient(addrs string, stdin *os.File, env ...string) ([]string, *exec.Cmd, error) {
	self, _ := os.Executable()
	cmd := exec.Command(self)
	cmd.Env = append(append(os.Environ(), dialEnv+"="+addrs, childDialEnv+"=", strayDialEnv+"=", spawnEnv+"="), env...)
	cmd.Stderr = os.Stderr
	cmd.Stdin = stdin
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, nil, err
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		cmd.Process.Kill()
		cmd.Wait()
		return nil, nil, fmt.Errorf("child: %w", err)
	}
	return strings.Fields(line), cmd, nil
}

// TestWatchLoopback watches a real process group, a process, its child
// and a stray (its grandchild, whose parent ended), each with a server of
// its own that it connects to, and connected to servers of this process,
// one of which plays the tap: the watch finds the group's own servers,
// and the other servers' ports but the tap's.
func TestWatchLoopback(t *testing.T) {
	var servers []string
	var ports []int
	for range 5 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				defer c.Close()
			}
		}()
		servers = append(servers, ln.Addr().String())
		ports = append(ports, ln.Addr().(*net.TCPAddr).Port)
	}
	self, _ := os.Executable()
	cmd := exec.Command(self)
	cmd.Env = append(os.Environ(), loopbackModeEnv+"=1", dialEnv+"="+servers[0]+","+servers[1], childDialEnv+"="+servers[2]+","+servers[3], strayDialEnv+"="+servers[4])
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { in.Close(); cmd.Wait() }()
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("the client: %v", err)
	}
	var own []int
	for _, f := range strings.Fields(line) {
		n, _ := strconv.Atoi(f)
		own = append(own, n)
	}
	slices.Sort(own)

	w := watchLoopback(cmd.Process.Pid)
	time.Sleep(3 * loopbackPollInterval)
	seen := w.finish()
	// servers[1] plays the tap.
	got := seen.result(map[int]bool{ports[1]: true}, []string{"MY_LLM=http://localhost:" + strconv.Itoa(ports[2]) + "/v1"})
	var want []store.LoopbackPort
	for _, p := range []int{ports[0], ports[2], ports[3], ports[4]} {
		lp := store.LoopbackPort{Port: p}
		if p == ports[2] {
			lp.Var = "MY_LLM"
		}
		want = append(want, lp)
	}
	slices.SortFunc(want, func(a, b store.LoopbackPort) int { return a.Port - b.Port })
	if got == nil || !slices.Equal(got.Own, own) || !slices.Equal(got.Ports, want) {
		t.Errorf("watch saw %+v, want own %v and ports %+v", got, own, want)
	}
}
