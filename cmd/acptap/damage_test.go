package main

import (
	"encoding/binary"
	"os"
	"strconv"
	"strings"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/acptap/acptap/internal/testing/damage"
)

// cmdDamage damages a store file for the scripts, the ways bad disks and
// stray writes do:
//
//	damage truncate FILE SIZE       cut the file to SIZE bytes
//	damage flip FILE OFFSET N       flip N bytes from OFFSET on
//	damage value FILE BUCKETS KEY   flip 8 bytes in the middle of a value
//	damage page FILE BUCKETS KEY    flip 32 bytes at the start of the page of a value
//	damage root FILE BUCKETS        flip 32 bytes at the start of a bucket's root page
//	damage meta FILE newest|older   make a meta page fail its checksum
//	damage rename FILE BUCKETS OLD NEW  rename a bucket to NEW, a Go-quoted string
//	damage hwm FILE PAGES           make the newest meta page claim PAGES pages, its checksum intact
//
// BUCKETS is a path of bucket names separated by '/'; KEY is a key, the
// Seq of an event (#N), or "first" for the bucket's first key.
func cmdDamage(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 3 {
		ts.Fatalf("usage: damage truncate|flip|value|page|root|hwm|meta FILE ...")
	}
	file := ts.MkAbs(args[1])
	num := func(s string) int64 {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			ts.Fatalf("damage: bad number %q", s)
		}
		return n
	}
	valueAt := func() (int64, int) {
		if len(args) != 4 {
			ts.Fatalf("usage: damage %s FILE BUCKETS KEY", args[0])
		}
		var key []byte
		switch k := args[3]; {
		case k == "first":
		case strings.HasPrefix(k, "#"):
			key = binary.BigEndian.AppendUint64(nil, uint64(num(k[1:])))
		default:
			key = []byte(k)
		}
		off, size, err := damage.Value(file, strings.Split(args[2], "/"), key)
		ts.Check(err)
		return off, size
	}
	switch args[0] {
	case "truncate":
		ts.Check(os.Truncate(file, num(args[2])))
	case "flip":
		if len(args) != 4 {
			ts.Fatalf("usage: damage flip FILE OFFSET N")
		}
		ts.Check(damage.Flip(file, num(args[2]), int(num(args[3]))))
	case "value":
		off, size := valueAt()
		ts.Check(damage.Flip(file, off+int64(size)/2, 8))
	case "page":
		off, _ := valueAt()
		ps, err := damage.PageSize(file)
		ts.Check(err)
		ts.Check(damage.Flip(file, off/int64(ps)*int64(ps), 32))
	case "root":
		off, err := damage.Root(file, strings.Split(args[2], "/"))
		ts.Check(err)
		ts.Check(damage.Flip(file, off, 32))
	case "rename":
		// The new name is unquoted, so a script can give escape codes
		// and newlines: damage rename FILE BUCKETS OLD "NEW".
		if len(args) != 5 {
			ts.Fatalf("usage: damage rename FILE BUCKETS OLD NEW")
		}
		name, err := strconv.Unquote(args[4])
		ts.Check(err)
		ts.Check(damage.RenameBucket(file, strings.Split(args[2], "/"), args[3], name))
	case "hwm":
		ts.Check(damage.SetHighWater(file, uint64(num(args[2]))))
	case "meta":
		newest, _, err := damage.NewestMeta(file)
		ts.Check(err)
		page := newest
		if args[2] == "older" {
			page = 1 - newest
		} else if args[2] != "newest" {
			ts.Fatalf("usage: damage meta FILE newest|older")
		}
		ts.Check(damage.BreakMeta(file, page))
	default:
		ts.Fatalf("damage: unknown %q", args[0])
	}
}
