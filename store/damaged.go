package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"os"
	"runtime"
	"runtime/debug"
	"strings"
)

// A damaged store file (cut short, bytes flipped by a bad disk or a stray
// write) must never crash the process. bbolt maps the file into memory and
// trusts what it reads there: a page past the end of a truncated file is a
// SIGBUS, a flipped page id or page type an assertion panic or an index out
// of range. So every bbolt call of this package runs under guard, which asks
// the runtime to turn memory faults into panics (debug.SetPanicOnFault, a
// per-goroutine setting) and turns the panics that bbolt, or the
// decompressor, raises into a *DamagedError. A panic of this package's own
// code is a bug, not damage: guard lets it go on.
//
// Cheaper checks come first (see checkMetaPages): the meta pages are read
// with pread, and a file shorter than its newest commit is refused before
// bbolt maps it, so that most damage is found without any fault.

// DamagedError says that a store file is damaged, and where. It matches
// ErrDamaged (errors.Is).
type DamagedError struct {
	Path      string // the store file
	Recording string // the recording whose data is damaged; "" for the file's own structure
	Seq       uint64 // the event, when known; 0 if not
	Where     string // what else locates it ("metadata", "page 9"); may be ""
	Err       error  // what was found wrong

	whole bool // the damage is of the file as a whole (found by Open), not of what an operation read
}

func (e *DamagedError) Error() string {
	var at []string
	if e.Recording != "" {
		at = append(at, "recording "+QuoteName(e.Recording))
	}
	if e.Seq != 0 {
		at = append(at, fmt.Sprintf("event %d", e.Seq))
	}
	if e.Where != "" {
		at = append(at, e.Where)
	}
	msg := "store " + e.Path + " is damaged"
	if len(at) > 0 {
		msg += " at " + strings.Join(at, ", ")
	}
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

// Unwrap makes a DamagedError match ErrDamaged and its cause.
func (e *DamagedError) Unwrap() []error { return []error{ErrDamaged, e.Err} }

// damaged returns a *DamagedError of the event seq (0 if none) and where.
func damaged(seq uint64, where string, err error) *DamagedError {
	return &DamagedError{Seq: seq, Where: where, Err: err}
}

// guard runs fn with memory faults turned into panics, and turns a panic
// of damage (see damagePanic) into a *DamagedError. It reports whether it
// recovered one: bbolt's state is then unknown (a lock of the DB may be
// held), and the caller must not use the DB again.
func guard(fn func() error) (recovered bool, err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			recovered, err = true, damagePanic(r)
		}
	}()
	return false, fn()
}

// damagePanic turns the recovered value r of a panic into a *DamagedError,
// or panics again with it when it is not a sign of damage: a memory fault
// (reading the mapped file past its end, or where a damaged page id
// points) is; a panic raised in bbolt or in the zstd decoder is; any other
// is a bug of acptap, which must not be reported as damage. It must be
// called from the deferred function that recovered r, whose stack still
// holds the frames that panicked.
func damagePanic(r any) *DamagedError {
	// With SetPanicOnFault, a nil pointer dereference is a fault too: one
	// near address 0 is a bug, not the mapping.
	if fault, ok := r.(interface{ Addr() uintptr }); ok && fault.Addr() >= minMapAddr {
		// The runtime words every fault as a nil dereference; say what
		// it was.
		return damaged(0, "", fmt.Errorf("a read of the mapped file failed (a memory fault at %#x: a page past the file's end, or where a damaged page id points)", fault.Addr()))
	}
	switch {
	case panickedIn("go.etcd.io/bbolt"):
		return damaged(0, "", fmt.Errorf("a page does not read (bbolt: %v)", r))
	case panickedIn("github.com/klauspost/compress"):
		return damaged(0, "", fmt.Errorf("a value does not decompress (zstd: %v)", r))
	}
	panic(r)
}

// minMapAddr is below any address the kernel maps a file at (Linux's
// vm.mmap_min_addr is 4 KiB or more, and mappings go far higher): a
// fault below it is a nil pointer, plus a field's offset.
const minMapAddr = 1 << 16

// panickedIn reports whether the function that panicked, the innermost
// frame of the panicking goroutine below the runtime's own, is of the
// package pkg or one under it.
func panickedIn(pkg string) bool {
	pcs := make([]uintptr, 64)
	n := runtime.Callers(3, pcs) // from the caller of the deferred function
	frames := runtime.CallersFrames(pcs[:n])
	panicking := false
	for {
		f, more := frames.Next()
		switch {
		case f.Function == "runtime.gopanic":
			panicking = true
		case panicking && !strings.HasPrefix(f.Function, "runtime."):
			return strings.HasPrefix(f.Function, pkg+".") || strings.HasPrefix(f.Function, pkg+"/")
		}
		if !more {
			return false
		}
	}
}

// Layout of a bbolt meta page, after the 16-byte page header: magic,
// version, page size, flags, the root bucket (page, sequence), the
// freelist's page, the high-water mark (the number of pages the commit
// uses), the transaction id and an FNV-64a checksum of all before it.
const (
	pageHeaderSize = 16
	metaSize       = 64
	metaChecksumAt = 56
	boltMagic      = 0xED0CDAED
	boltVersion    = 2
)

// metaPage is what a meta page says.
type metaPage struct {
	valid    bool   // magic, version and checksum are right
	pageSize uint32 //
	root     uint64 // the root bucket's page
	freelist uint64 // the freelist's page; noFreelist if none
	hwm      uint64 // pages used by the commit
	txid     uint64
}

func parseMeta(b []byte) metaPage {
	if len(b) < pageHeaderSize+metaSize {
		return metaPage{}
	}
	m := b[pageHeaderSize : pageHeaderSize+metaSize]
	le := binary.LittleEndian
	h := fnv.New64a()
	h.Write(m[:metaChecksumAt])
	return metaPage{
		valid:    le.Uint32(m) == boltMagic && le.Uint32(m[4:]) == boltVersion && le.Uint64(m[metaChecksumAt:]) == h.Sum64(),
		pageSize: le.Uint32(m[8:]),
		root:     le.Uint64(m[16:]),
		freelist: le.Uint64(m[32:]),
		hwm:      le.Uint64(m[40:]),
		txid:     le.Uint64(m[48:]),
	}
}

// checkMetaPages reads the two meta pages of the bbolt file f, of size
// bytes, as bbolt will pick one: the valid one of the higher txid. It
// fails with a *DamagedError if the file is shorter than that commit's
// pages (bbolt would fault reading them), and returns as warning a
// *DamagedError when the other meta page is damaged: bbolt then silently
// uses the commit before the newest if that is the damaged one. It
// leaves to bbolt the files it would refuse itself (no valid meta page).
// If write, it checks the freelist too, which bbolt reads only to write:
// a damaged one makes it panic, or hand out pages in use.
func checkMetaPages(f *os.File, size int64, write bool) (warning, err error) {
	use, other, otherID, pageSize := readMetaPages(f)
	if !use.valid || int64(use.pageSize) != pageSize {
		return nil, nil // bbolt refuses it, or searches for its page size
	}
	if use.hwm > pagesIn(size, pageSize) {
		return nil, &DamagedError{whole: true, Where: "its end", Err: cutShortError(size, pageSize, use)}
	}
	if write && use.freelist != noFreelist {
		if err := checkFreelist(f, pageSize, use); err != nil {
			return nil, &DamagedError{whole: true, Where: fmt.Sprintf("page %d, its freelist", use.freelist), Err: err}
		}
	}
	if other.valid {
		return nil, nil
	}
	switch other.txid {
	case use.txid + 1:
		warning = fmt.Errorf("its newest meta page (page %d) is damaged; opened the previous commit (txid %d), so the last commit (txid %d) is lost", otherID, use.txid, other.txid)
	case use.txid - 1:
		warning = fmt.Errorf("meta page %d (txid %d) is damaged; the newest commit (txid %d) is intact and nothing is lost", otherID, other.txid, use.txid)
	default:
		warning = fmt.Errorf("meta page %d is damaged; opened the commit of txid %d, and a later one (txid %d), if there was one, is lost", otherID, use.txid, use.txid+1)
	}
	return &DamagedError{whole: true, Err: warning}, nil
}

// pagesIn is how many whole pages of pageSize bytes a file of size bytes
// holds. A commit of more pages than that was cut short: compared in
// pages, since a meta page's high-water mark times the page size may not
// fit an int64.
func pagesIn(size, pageSize int64) uint64 {
	if size <= 0 {
		return 0
	}
	return uint64(size / pageSize)
}

// cutShortError says that the file, of size bytes, is shorter than the
// commit m needs.
func cutShortError(size, pageSize int64, m metaPage) error {
	if m.hwm <= math.MaxInt64/uint64(pageSize) {
		return fmt.Errorf("the file is %d bytes, its last commit (txid %d) needs %d: it was cut short", size, m.txid, m.hwm*uint64(pageSize))
	}
	return fmt.Errorf("the file is %d bytes, its last commit (txid %d) needs %d pages of %d bytes: it was cut short", size, m.txid, m.hwm, pageSize)
}

// readMetaPages reads the two meta pages of the bbolt file f and returns
// the one bbolt uses, the valid one of the higher txid (use.valid is
// false if there is none), the other and its page number, and the page
// size.
func readMetaPages(f *os.File) (use, other metaPage, otherID int, pageSize int64) {
	var buf [pageHeaderSize + metaSize]byte
	read := func(off int64) metaPage {
		if n, _ := f.ReadAt(buf[:], off); n < len(buf) {
			return metaPage{}
		}
		return parseMeta(buf[:])
	}
	m0 := read(0)
	pageSize = int64(m0.pageSize)
	if !m0.valid || pageSize <= 0 || pageSize > 1<<24 {
		pageSize = int64(os.Getpagesize())
	}
	m1 := read(pageSize)
	if !m0.valid || m1.valid && m1.txid > m0.txid {
		return m1, m0, 0, pageSize
	}
	return m0, m1, 1, pageSize
}

// checkFreelist checks the freelist of the commit m: a freelist page,
// below the high-water mark, naming pages that are.
func checkFreelist(f *os.File, pageSize int64, m metaPage) error {
	id := m.freelist
	if id < 2 || id >= m.hwm {
		return fmt.Errorf("out of bounds (the commit has %d pages)", m.hwm)
	}
	var hdr [pageHeaderSize + 8]byte
	if _, err := f.ReadAt(hdr[:], int64(id)*pageSize); err != nil {
		return fmt.Errorf("does not read: %v", err)
	}
	le := binary.LittleEndian
	pid, flags, count, overflow := le.Uint64(hdr[:]), le.Uint16(hdr[8:]), uint64(le.Uint16(hdr[10:])), uint64(le.Uint32(hdr[12:]))
	start := int64(pageHeaderSize)
	if count == 0xFFFF {
		count, start = le.Uint64(hdr[pageHeaderSize:]), start+8
	}
	switch {
	case pid != id:
		return fmt.Errorf("says it is page %d", pid)
	case flags != freelistPageFlag:
		return fmt.Errorf("not a freelist page (flags %#x)", flags)
	case overflow >= m.hwm || id+overflow >= m.hwm:
		return fmt.Errorf("its %d overflow pages go past the high-water mark %d", overflow, m.hwm)
	case count > ((overflow+1)*uint64(pageSize)-uint64(start))/8:
		return fmt.Errorf("%d free pages do not fit it", count)
	}
	ids := make([]byte, 8*count)
	if _, err := f.ReadAt(ids, int64(id)*pageSize+start); err != nil {
		return fmt.Errorf("does not read: %v", err)
	}
	for i := range count {
		if fid := le.Uint64(ids[8*i:]); fid < 2 || fid >= m.hwm {
			return fmt.Errorf("names page %d, out of bounds", fid)
		}
	}
	return nil
}

// errDamagedMeta is said of a bbolt file whose meta pages both fail
// their checksum: neither commit can be trusted.
var errDamagedMeta = errors.New("both meta pages fail their checksum")
