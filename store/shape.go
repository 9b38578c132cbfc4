package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"unsafe"

	bolt "go.etcd.io/bbolt"
)

// bbolt walks a bucket's pages as the page ids in them say, and trusts
// them: a damaged branch page whose child is itself, or an ancestor, makes
// a cursor descend for ever (its stack grows until the process runs out of
// memory), and the recursions of DeleteBucket and of freeing pages overflow
// the stack, which no recover can catch. FuzzDamagedStore found both. So,
// before this package lets bbolt walk a bucket that damage may have
// reached, walkable follows its page ids itself, each page once, and
// refuses the bucket if they do not form a tree.
//
// It reads the pages through bbolt's own mapping of the file (a page past
// the file's end is a fault, which guard turns into damage) and reads of
// each leaf only its header, unless deep: then it also follows the buckets
// inside the leaves, as deleting a bucket does. The cost is a look at every
// page header of the bucket, well below what reading the bucket costs.

// walkable returns a *DamagedError if bbolt could not walk the pages of
// the bucket b without looping: a page id out of the file's pages, a page
// that is not of its id, of a type other than branch or leaf, with more
// elements than fit it, or reached twice. With deep it follows the
// buckets inside b too. The error's Recording is rec.
func walkable(b *bolt.Bucket, rec string, deep bool) error {
	var p pages
	return p.walkable(b, rec, deep)
}

// pages is the view of a transaction's pages that walkable reads, taken
// at its first use.
type pages struct {
	m      fileMap
	mapped bool
}

// walkable is the package function walkable, reading through p.
func (p *pages) walkable(b *bolt.Bucket, rec string, deep bool) error {
	root := uint64(b.Root())
	if root == 0 {
		if !deep {
			return nil // inline: its page is a value of its parent's
		}
		// An inline bucket's own buckets are the only pages to follow;
		// bbolt does not hand out the inline page, but a cursor of b
		// reads only that page.
		c := b.Cursor()
		for k, v := c.First(); k != nil; k, v = c.Next() {
			if sub := b.Bucket(k); v == nil && sub != nil {
				if err := p.walkable(sub, rec, true); err != nil {
					return err
				}
			}
		}
		return nil
	}
	if !p.mapped {
		m, err := mapFile(b.Tx())
		if err != nil {
			return err
		}
		p.m, p.mapped = m, true
	}
	w := &walker{m: p.m, seen: map[uint64]bool{}, deep: deep}
	if err := w.tree(root); err != nil {
		return &DamagedError{Recording: rec, Where: fmt.Sprintf("page %d", w.at), Err: err}
	}
	return nil
}

// walkable is the package function walkable, remembered per commit for
// read transactions: Events reads a big recording in many transactions,
// each of which would walk its events again.
func (s *Store) walkable(b *bolt.Bucket, rec string, deep bool) error {
	tx := b.Tx()
	if tx.Writable() || b.Root() == 0 {
		return walkable(b, rec, deep)
	}
	key := walkedKey{txid: tx.ID(), root: uint64(b.Root()), deep: deep}
	s.walkedMu.Lock()
	ok := s.walked[key]
	s.walkedMu.Unlock()
	if ok {
		return nil
	}
	if err := walkable(b, rec, deep); err != nil {
		return err
	}
	s.walkedMu.Lock()
	defer s.walkedMu.Unlock()
	if s.walked == nil || len(s.walked) >= maxWalked {
		s.walked = map[walkedKey]bool{}
	}
	s.walked[key] = true
	return nil
}

// walkedKey is a bucket walkable found sound: its root page in a commit.
type walkedKey struct {
	txid int
	root uint64
	deep bool
}

// maxWalked bounds Store.walked, which is cleared when it fills.
const maxWalked = 64

// fileMap is a read-only view of a store file's pages, as a transaction
// sees them.
type fileMap struct {
	data     []byte
	pageSize uint64
	pages    uint64 // the high-water mark of the transaction's commit
}

// mapFile returns the pages of tx's file that tx's commit uses, in bbolt's
// own mapping of the file. That mapping covers them for as long as tx is
// open: bbolt maps at least the file, which checkMetaPages found long
// enough for the commit, and remaps only in a write transaction's commit,
// after walkable. A mapping of walkable's own had cost a Writer's every
// commit an mmap and an munmap, whose TLB shootdowns interrupt the
// threads that forward the agent's bytes.
func mapFile(tx *bolt.Tx) (fileMap, error) {
	info := tx.DB().Info()
	pageSize := uint64(info.PageSize)
	size := tx.Size()
	if pageSize == 0 || size <= 0 || uint64(size)%pageSize != 0 || info.Data == 0 {
		return fileMap{}, fmt.Errorf("walk the store's pages: %d bytes of pages of %d", size, pageSize)
	}
	// info.Data is the address of memory bbolt mapped with mmap, which
	// the garbage collector neither moves nor frees; reading it as a
	// pointer keeps the conversion in a form vet accepts.
	base := *(*unsafe.Pointer)(unsafe.Pointer(&info.Data))
	data := unsafe.Slice((*byte)(base), size)
	return fileMap{data: data, pageSize: pageSize, pages: uint64(size) / pageSize}, nil
}

// walker follows the page ids of a tree of pages.
type walker struct {
	m    fileMap
	seen map[uint64]bool // branch pages, and with deep every page, reached
	deep bool
	at   uint64 // the page a problem was found in
}

var errNotTree = errors.New("the pages do not form a tree")

// tree follows the tree of pages under the page id.
func (w *walker) tree(id uint64) error {
	w.at = id
	if id < 2 || id >= w.m.pages {
		return fmt.Errorf("%w: a page id out of bounds (the commit has %d pages)", errNotTree, w.m.pages)
	}
	h := readPageHeader(w.m.data[id*w.m.pageSize:])
	switch {
	case h.id != id:
		return fmt.Errorf("%w: the page says it is page %d", errNotTree, h.id)
	case h.flags != branchPageFlag && h.flags != leafPageFlag:
		return fmt.Errorf("%w: a page of type %#x where a branch or leaf must be", errNotTree, h.flags)
	case h.overflow >= w.m.pages-id:
		return fmt.Errorf("%w: %d overflow pages past the commit's %d", errNotTree, h.overflow, w.m.pages)
	case uint64(pageHeaderSize+h.count*elementSize) > (h.overflow+1)*w.m.pageSize:
		return fmt.Errorf("%w: %d elements do not fit the page", errNotTree, h.count)
	}
	if h.flags == leafPageFlag && !w.deep {
		return nil
	}
	if w.seen[id] {
		return fmt.Errorf("%w: the page is reached twice", errNotTree)
	}
	w.seen[id] = true
	return w.elements(w.m.data[id*w.m.pageSize:(id+h.overflow+1)*w.m.pageSize], h, id)
}

// elements follows the children of the branch page p, or the buckets of
// the leaf page p, of header h: the page id, or an inline bucket page, a
// value of the page id.
func (w *walker) elements(p []byte, h pageHeader, id uint64) error {
	for i := range h.count {
		if h.flags == branchPageFlag {
			if err := w.tree(childPage(p, i)); err != nil {
				return err
			}
			continue
		}
		if !isBucket(p, i) {
			continue
		}
		_, v, ok := element(p, h.flags, i)
		if !ok || len(v) < bucketHeaderSize {
			w.at = id
			return fmt.Errorf("%w: a bucket's header reaches past its page", errNotTree)
		}
		if root := binary.LittleEndian.Uint64(v); root != 0 {
			if err := w.tree(root); err != nil {
				return err
			}
			continue
		}
		inline := v[bucketHeaderSize:]
		if len(inline) < pageHeaderSize {
			w.at = id
			return fmt.Errorf("%w: an inline bucket is cut short", errNotTree)
		}
		ih := readPageHeader(inline)
		if ih.flags != leafPageFlag || pageHeaderSize+ih.count*elementSize > len(inline) {
			w.at = id
			return fmt.Errorf("%w: an inline bucket that is no leaf of its size", errNotTree)
		}
		if err := w.elements(inline, ih, id); err != nil {
			return err
		}
	}
	return nil
}
