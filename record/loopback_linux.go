package record

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"net"
	"os"
	"strconv"
	"strings"
	"time"
)

// A loopbackWatch looks at the sockets of the agent's process group every
// loopbackPollInterval, in a goroutine of its own, off the forwarding of
// stdio and HTTP: the process table of /proc gives the group's processes,
// their fds the socket inodes, and the TCP tables of the agent's network
// namespace (/proc/PID/net/tcp and tcp6) what each inode connects, read
// only when an inode not seen before is there.
type loopbackWatch struct {
	pgid int
	stop chan struct{}
	done chan struct{}

	// Owned by the goroutine until done is closed.
	seen loopbackSeen
	// known are the inodes found in the TCP tables, pending those not
	// (yet) found there, another kind of socket (unix, UDP) or a TCP one
	// not yet bound, with the polls since the tables were last read for
	// them.
	known   map[uint64]bool
	pending map[uint64]int
	// strays are processes of the group that are not descendants of
	// its leader (whose parent ended: a server that daemonized by a
	// double fork), found by a scan of the whole process table every
	// scanEvery polls, and looked at in every poll since.
	strays map[int]bool
	polls  int
}

// scanEvery is how many polls pass between two scans of the whole
// process table for the group's strays: it costs a read per process of
// the system, where a poll reads only the group's own.
const scanEvery = 40

// recheckPending is how many polls pass before the TCP tables are read
// again for a socket they did not have, which may have been connected
// since: a unix socket would otherwise cost a read of the tables at every
// poll.
const recheckPending = 20

// watchLoopback starts watching the process group pgid.
func watchLoopback(pgid int) *loopbackWatch {
	w := &loopbackWatch{
		pgid:    pgid,
		stop:    make(chan struct{}),
		done:    make(chan struct{}),
		seen:    loopbackSeen{listens: map[int]bool{}, conns: map[conn]bool{}},
		known:   map[uint64]bool{},
		pending: map[uint64]int{},
		strays:  map[int]bool{},
	}
	go w.run()
	return w
}

func (w *loopbackWatch) run() {
	defer close(w.done)
	t := time.NewTicker(loopbackPollInterval)
	defer t.Stop()
	for {
		w.poll()
		select {
		case <-w.stop:
			return
		case <-t.C:
		}
	}
}

// finish stops the watch and returns what it saw.
func (w *loopbackWatch) finish() *loopbackSeen {
	close(w.stop)
	<-w.done
	return &w.seen
}

// poll looks at the group's sockets once.
func (w *loopbackWatch) poll() {
	inodes := map[uint64]bool{}
	for _, pid := range w.groupPids() {
		w.socketInodes(pid, inodes)
	}
	readTables := false
	for ino := range inodes {
		if w.known[ino] {
			continue
		}
		n, ok := w.pending[ino]
		if !ok || n >= recheckPending {
			readTables = true
			break
		}
	}
	if readTables {
		for _, table := range []string{"tcp", "tcp6"} {
			w.readTable("/proc/"+strconv.Itoa(w.pgid)+"/net/"+table, inodes)
		}
	}
	// Forget the sockets closed since; count the polls of the others
	// not found.
	for ino := range w.known {
		if !inodes[ino] {
			delete(w.known, ino)
		}
	}
	for ino := range inodes {
		switch {
		case w.known[ino]:
			delete(w.pending, ino)
		case readTables:
			w.pending[ino] = 1
		default:
			w.pending[ino]++
		}
	}
	for ino := range w.pending {
		if !inodes[ino] {
			delete(w.pending, ino)
		}
	}
}

// socketInodes adds the inodes of pid's sockets to inodes.
func (w *loopbackWatch) socketInodes(pid int, inodes map[uint64]bool) {
	dir := "/proc/" + strconv.Itoa(pid) + "/fd/"
	f, err := os.Open(dir)
	if err != nil {
		return // gone meanwhile
	}
	names, _ := f.Readdirnames(-1)
	f.Close()
	for _, fd := range names {
		link, err := os.Readlink(dir + fd)
		if err != nil {
			continue
		}
		if s, ok := strings.CutPrefix(link, "socket:["); ok {
			if ino, err := strconv.ParseUint(strings.TrimSuffix(s, "]"), 10, 64); err == nil {
				inodes[ino] = true
			}
		}
	}
}

// readTable reads a TCP table of /proc for the sockets of inodes: a
// listener's port, and the ports of a connection between two loopback
// addresses.
func (w *loopbackWatch) readTable(path string, inodes map[uint64]bool) {
	f, err := os.Open(path)
	if err != nil {
		return
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Scan() // the header
	for sc.Scan() {
		e, ok := parseTCPLine(sc.Bytes())
		if !ok || !inodes[e.inode] {
			continue
		}
		w.known[e.inode] = true
		switch {
		case e.state == tcpListen:
			w.seen.listens[e.local.port] = true
		case e.local.ip.IsLoopback() && e.remote.ip.IsLoopback():
			w.seen.conns[conn{local: e.local.port, remote: e.remote.port}] = true
		}
	}
}

// tcpListen is the state of a listening socket in /proc/net/tcp.
const tcpListen = 0x0A

type tcpAddr struct {
	ip   net.IP
	port int
}

// tcpEntry is a line of /proc/net/tcp or tcp6.
type tcpEntry struct {
	local, remote tcpAddr
	state         int
	inode         uint64
}

// parseTCPLine parses a line of /proc/net/tcp or tcp6:
//
//	sl local_address rem_address st tx_queue:rx_queue tr:tm->when retrnsmt uid timeout inode ...
//	0: 0100007F:1F90 0100007F:C350 01 00000000:00000000 00:00000000 00000000 1000 0 12345 ...
func parseTCPLine(line []byte) (tcpEntry, bool) {
	f := bytes.Fields(line)
	if len(f) < 10 {
		return tcpEntry{}, false
	}
	var e tcpEntry
	var ok bool
	if e.local, ok = parseTCPAddr(string(f[1])); !ok {
		return tcpEntry{}, false
	}
	if e.remote, ok = parseTCPAddr(string(f[2])); !ok {
		return tcpEntry{}, false
	}
	st, err := strconv.ParseUint(string(f[3]), 16, 8)
	if err != nil {
		return tcpEntry{}, false
	}
	e.state = int(st)
	if e.inode, err = strconv.ParseUint(string(f[9]), 10, 64); err != nil {
		return tcpEntry{}, false
	}
	return e, true
}

// parseTCPAddr parses an address of /proc/net/tcp: the IP in hex as the
// kernel holds it, 32-bit words in host order (little-endian here), a
// colon, and the port in hex.
func parseTCPAddr(s string) (tcpAddr, bool) {
	h, p, ok := strings.Cut(s, ":")
	if !ok || (len(h) != 8 && len(h) != 32) {
		return tcpAddr{}, false
	}
	b, err := hex.DecodeString(h)
	if err != nil {
		return tcpAddr{}, false
	}
	port, err := strconv.ParseUint(p, 16, 16)
	if err != nil {
		return tcpAddr{}, false
	}
	for i := 0; i < len(b); i += 4 {
		b[i], b[i+1], b[i+2], b[i+3] = b[i+3], b[i+2], b[i+1], b[i]
	}
	return tcpAddr{ip: net.IP(b), port: int(port)}, true
}

// groupPids returns the live processes of the group: its leader and the
// leader's descendants in the group, by the children files of /proc, and
// the strays and theirs. Every scanEvery polls, and where the kernel has
// no children files, it scans the whole process table instead.
func (w *loopbackWatch) groupPids() []int {
	if pgrpOf(w.pgid) != w.pgid {
		return nil // the leader is gone, which ends the recording
	}
	w.polls++
	if w.polls%scanEvery == 1 {
		return w.scan()
	}
	roots := []int{w.pgid}
	for pid := range w.strays {
		if pgrpOf(pid) == w.pgid {
			roots = append(roots, pid)
		} else {
			delete(w.strays, pid)
		}
	}
	seen := map[int]bool{}
	var pids []int
	for len(roots) > 0 {
		pid := roots[len(roots)-1]
		roots = roots[:len(roots)-1]
		if seen[pid] {
			continue
		}
		seen[pid] = true
		pids = append(pids, pid)
		kids, ok := children(pid)
		if !ok {
			return w.scan()
		}
		for _, k := range kids {
			if pgrpOf(k) == w.pgid {
				roots = append(roots, k)
			}
		}
	}
	return pids
}

// scan returns the processes of the group by the whole process table,
// and keeps those that are not the leader's descendants as strays.
func (w *loopbackWatch) scan() []int {
	pids := scanGroup(w.pgid)
	parents := map[int]int{}
	for _, pid := range pids {
		parents[pid] = ppidOf(pid)
	}
	clear(w.strays)
	for _, pid := range pids {
		// A stray's line of parents within the group ends short of the
		// leader.
		p := pid
		for steps := 0; p != w.pgid && steps < len(pids); steps++ {
			pp, ok := parents[p]
			if !ok {
				break
			}
			p = pp
		}
		if p != w.pgid {
			w.strays[pid] = true
		}
	}
	return pids
}

// children returns the children of pid's threads; ok is false where the
// kernel has no children files.
func children(pid int) (kids []int, ok bool) {
	dir := "/proc/" + strconv.Itoa(pid) + "/task/"
	f, err := os.Open(dir)
	if err != nil {
		return nil, true // gone meanwhile
	}
	tids, _ := f.Readdirnames(-1)
	f.Close()
	for _, tid := range tids {
		b, err := os.ReadFile(dir + tid + "/children")
		if os.IsNotExist(err) {
			if _, serr := os.Stat(dir + tid); serr == nil {
				return nil, false // the thread is there, its file is not
			}
			continue
		}
		for _, s := range strings.Fields(string(b)) {
			if n, err := strconv.Atoi(s); err == nil {
				kids = append(kids, n)
			}
		}
	}
	return kids, true
}

// pgrpOf returns the process group of pid, 0 if it is gone.
func pgrpOf(pid int) int {
	_, pgrp := statOf(pid)
	return pgrp
}

// ppidOf returns the parent of pid, 0 if it is gone.
func ppidOf(pid int) int {
	ppid, _ := statOf(pid)
	return ppid
}

// statOf returns the parent and the process group of pid, zeros if it is
// gone.
func statOf(pid int) (ppid, pgrp int) {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, 0
	}
	// pid (comm) state ppid pgrp ...; comm may hold spaces and ")".
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, 0
	}
	fields := strings.Fields(string(stat[i+1:]))
	if len(fields) < 3 {
		return 0, 0
	}
	ppid, _ = strconv.Atoi(fields[1])
	pgrp, _ = strconv.Atoi(fields[2])
	return ppid, pgrp
}

// scanGroup returns the processes of group pgid by the whole process
// table.
func scanGroup(pgid int) []int {
	f, err := os.Open("/proc")
	if err != nil {
		return nil
	}
	names, _ := f.Readdirnames(-1)
	f.Close()
	var pids []int
	for _, name := range names {
		if pid, err := strconv.Atoi(name); err == nil && pgrpOf(pid) == pgid {
			pids = append(pids, pid)
		}
	}
	return pids
}
