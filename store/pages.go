package store

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"slices"
)

// checkPages is bbolt's consistency check (Tx.Check), done again on the
// file read with pread rather than mapped: Tx.Check runs in a goroutine of
// bbolt's, where a page id that points past the mapping is a fault that
// kills the process, while a read past the end of a file is only a short
// read. It walks the pages from the newest valid meta page as bbolt opens
// it: each page referenced once, of the right id and type, below the
// high-water mark and inside the file, its keys in order, and every page
// below the mark either reachable or free. A problem found in the pages
// of a recording names the recording.
type pageChecker struct {
	f        *os.File
	size     int64  // of the file
	pageSize int64  //
	hwm      uint64 // of the commit checked
	inFile   uint64 // whole pages in the file
	seen     map[uint64]bool
	free     map[uint64]bool
	report   func(Problem)
	problems int // reported of pages
}

// Element layout of branch and leaf pages (see bbolt's internal/common).
const (
	branchPageFlag   = 0x01
	leafPageFlag     = 0x02
	metaPageFlag     = 0x04
	freelistPageFlag = 0x10
	bucketLeafFlag   = 0x01
	elementSize      = 16
	bucketHeaderSize = 16
	noFreelist       = ^uint64(0)
)

// pageHeader is what the first 16 bytes of a page say.
type pageHeader struct {
	id       uint64
	flags    uint16
	count    int // elements
	overflow uint64
}

func readPageHeader(b []byte) pageHeader {
	le := binary.LittleEndian
	return pageHeader{id: le.Uint64(b), flags: le.Uint16(b[8:]), count: int(le.Uint16(b[10:])), overflow: uint64(le.Uint32(b[12:]))}
}

// element returns the key and the value (nil for a branch) of element i
// of the branch or leaf page p, whose elements fit p, and whether they
// lie inside p.
func element(p []byte, flags uint16, i int) (k, v []byte, ok bool) {
	le := binary.LittleEndian
	at := pageHeaderSize + i*elementSize
	e := p[at : at+elementSize]
	var pos, ksize, vsize uint64
	if flags == branchPageFlag {
		pos, ksize = uint64(le.Uint32(e)), uint64(le.Uint32(e[4:]))
	} else {
		pos, ksize, vsize = uint64(le.Uint32(e[4:])), uint64(le.Uint32(e[8:])), uint64(le.Uint32(e[12:]))
	}
	start := uint64(at) + pos
	if start+ksize+vsize > uint64(len(p)) {
		return nil, nil, false
	}
	return p[start : start+ksize], p[start+ksize : start+ksize+vsize], true
}

// childPage returns the page id of element i of the branch page p.
func childPage(p []byte, i int) uint64 {
	return binary.LittleEndian.Uint64(p[pageHeaderSize+i*elementSize+8:])
}

// isBucket reports whether element i of the leaf page p is a bucket.
func isBucket(p []byte, i int) bool {
	return binary.LittleEndian.Uint32(p[pageHeaderSize+i*elementSize:])&bucketLeafFlag != 0
}

// checkPages checks the bbolt file f, of size bytes. It reports whether
// bbolt can open the file at all (a valid meta page).
func checkPages(f *os.File, size int64, report func(Problem)) (usable bool) {
	use, other, otherID, pageSize := readMetaPages(f)
	if !use.valid || int64(use.pageSize) != pageSize {
		report(Problem{What: "both meta pages fail their checksum: bbolt cannot open the file"})
		return false
	}
	if !other.valid {
		if other.txid == use.txid+1 {
			report(Problem{What: fmt.Sprintf("meta page %d, of the newest commit (txid %d), is damaged: that commit is lost, the one before (txid %d) is read", otherID, other.txid, use.txid)})
		} else {
			report(Problem{What: fmt.Sprintf("meta page %d is damaged; the other, of txid %d, is read", otherID, use.txid)})
		}
	}
	inFile := pagesIn(size, pageSize)
	if use.hwm > inFile {
		report(Problem{What: cutShortError(size, pageSize, use).Error()})
	}
	c := &pageChecker{f: f, size: size, pageSize: pageSize, hwm: use.hwm, inFile: inFile,
		seen: map[uint64]bool{0: true, 1: true}, free: map[uint64]bool{}, report: report}
	if use.freelist != noFreelist {
		c.freelist(use.freelist)
	}
	c.bucket(use.root, nil, nil)
	// Only the pages in the file are looked for: a meta page whose
	// checksum holds may still claim 2^40 pages of a file of ten, and
	// the pages past the end were said to be missing above.
	var unreachable, first uint64
	for id := uint64(2); id < min(c.hwm, inFile); id++ {
		if !c.seen[id] && !c.free[id] {
			if unreachable == 0 {
				first = id
			}
			unreachable++
		}
	}
	// Pages below a damaged one are not reached: not worth saying then.
	if unreachable > 0 && c.problems == 0 {
		report(Problem{What: fmt.Sprintf("%d pages neither reachable nor free (the first: page %d)", unreachable, first)})
	}
	return true
}

// page reads the page id and its overflow pages, or reports why it
// cannot. want is the page flag expected (0: branch or leaf).
func (c *pageChecker) page(id uint64, want uint16, rec string) []byte {
	bad := func(format string, args ...any) []byte {
		c.problems++
		c.report(Problem{Recording: rec, What: fmt.Sprintf("page %d: ", id) + fmt.Sprintf(format, args...)})
		return nil
	}
	if id < 2 || id >= c.hwm {
		return bad("out of bounds (the commit has %d pages)", c.hwm)
	}
	var hdr [pageHeaderSize]byte
	if id >= c.inFile {
		return bad("past the end of the file")
	}
	if n, _ := c.f.ReadAt(hdr[:], int64(id)*c.pageSize); n < len(hdr) {
		return bad("past the end of the file")
	}
	h := readPageHeader(hdr[:])
	pid, flags, overflow := h.id, h.flags, h.overflow
	switch {
	case pid != id:
		return bad("says it is page %d", pid)
	case want != 0 && flags != want, want == 0 && flags != branchPageFlag && flags != leafPageFlag:
		return bad("unexpected type (flags %#x)", flags)
	case overflow >= c.hwm || id+overflow >= c.hwm:
		return bad("its %d overflow pages go past the high-water mark %d", overflow, c.hwm)
	case overflow >= c.inFile-id:
		// Checked before its pages are marked or read: under a high-water
		// mark the file does not reach, overflow may be 2^32 pages.
		return bad("its %d overflow pages go past the end of the file", overflow)
	}
	for i := id; i <= id+overflow; i++ {
		if c.seen[i] {
			return bad("referenced twice")
		}
		if c.free[i] {
			return bad("in use and free")
		}
		c.seen[i] = true
	}
	p := make([]byte, (overflow+1)*uint64(c.pageSize))
	if n, _ := c.f.ReadAt(p, int64(id)*c.pageSize); n < len(p) {
		return bad("past the end of the file")
	}
	return p
}

func (c *pageChecker) freelist(id uint64) {
	p := c.page(id, freelistPageFlag, "")
	if p == nil {
		return
	}
	le := binary.LittleEndian
	n, ids := uint64(le.Uint16(p[10:])), p[pageHeaderSize:]
	if n == 0xFFFF {
		n, ids = le.Uint64(ids), ids[8:]
	}
	if n > uint64(len(ids))/8 {
		c.problems++
		c.report(Problem{What: fmt.Sprintf("page %d: freelist of %d pages does not fit its page", id, n)})
		return
	}
	for i := range n {
		fid := le.Uint64(ids[8*i:])
		switch {
		case fid < 2 || fid >= c.hwm:
			c.problems++
			c.report(Problem{What: fmt.Sprintf("page %d: freelist names page %d, out of bounds", id, fid)})
			return
		case c.free[fid]:
			c.problems++
			c.report(Problem{What: fmt.Sprintf("page %d: freelist names page %d twice", id, fid)})
			return
		case c.seen[fid]:
			c.problems++
			c.report(Problem{What: fmt.Sprintf("page %d: freelist names page %d, which is in use", id, fid)})
			return
		}
		c.free[fid] = true
	}
}

// bucket walks the bucket whose root is page root (or, if root is 0, the
// inline page), at path of bucket names.
func (c *pageChecker) bucket(root uint64, inline []byte, path []string) {
	if root == 0 {
		c.node(inline, 0, nil, nil, path, true)
		return
	}
	c.tree(root, nil, nil, path)
}

// recordingOf is the recording whose data is under the bucket path.
func recordingOf(path []string) string {
	if len(path) >= 2 && path[0] == string(recordingsBucket) {
		return path[1]
	}
	return ""
}

// tree walks the page id, whose keys must be at least min and below max
// (nil: no bound).
func (c *pageChecker) tree(id uint64, min, max []byte, path []string) {
	p := c.page(id, 0, recordingOf(path))
	if p != nil {
		c.node(p, id, min, max, path, false)
	}
}

// node checks the branch or leaf page p (the page id, or an inline page).
func (c *pageChecker) node(p []byte, id uint64, min, max []byte, path []string, inline bool) {
	bad := func(format string, args ...any) {
		where := fmt.Sprintf("page %d: ", id)
		if inline {
			where = "an inline bucket: "
		}
		c.problems++
		c.report(Problem{Recording: recordingOf(path), What: where + fmt.Sprintf(format, args...)})
	}
	if len(p) < pageHeaderSize {
		bad("truncated")
		return
	}
	h := readPageHeader(p)
	flags, count := h.flags, h.count
	if inline && flags != leafPageFlag {
		bad("unexpected type (flags %#x)", flags)
		return
	}
	if pageHeaderSize+count*elementSize > len(p) {
		bad("%d elements do not fit the page", count)
		return
	}
	var prev []byte
	for i := range count {
		k, v, ok := element(p, flags, i)
		if !ok {
			bad("element %d reaches past the page", i)
			return
		}
		if prev != nil && bytes.Compare(prev, k) >= 0 || min != nil && bytes.Compare(k, min) < 0 || max != nil && bytes.Compare(k, max) >= 0 {
			bad("key %d out of order", i)
			return
		}
		prev = k
		if flags == branchPageFlag {
			next := max
			if i+1 < count {
				if nk, _, ok := element(p, flags, i+1); ok {
					next = nk
				}
			}
			c.tree(childPage(p, i), k, next, path)
			continue
		}
		if !isBucket(p, i) {
			continue
		}
		if len(v) < bucketHeaderSize {
			bad("bucket %s: its header is truncated", quoteKey(k))
			return
		}
		c.bucket(binary.LittleEndian.Uint64(v), slices.Clone(v[bucketHeaderSize:]), append(slices.Clip(path), string(k)))
	}
}
