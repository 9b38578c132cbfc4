package store

import (
	"bytes"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/acptap/acptap/internal/exchange"
	"github.com/acptap/acptap/internal/testing/damage"
)

// damageFixture writes a store of three recordings to path: a, b (with a
// workspace snapshot) and c, each of frames committed in batches (frame
// blocks) and two LLM exchanges, with data that does not compress, so
// that the file has dozens of pages. c is left interrupted, with the Seq
// of an exchange reserved and never written.
func damageFixture(t testing.TB, path string) {
	t.Helper()
	s, err := Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	r := rand.New(rand.NewPCG(1, 2))
	junk := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = 'a' + byte(r.IntN(26))
		}
		return b
	}
	for _, name := range []string{"a", "b", "c"} {
		w, err := s.Create(Recording{Name: name, Argv: []string{"agent", name}, Snapshot: name == "b"}, false)
		if err != nil {
			t.Fatal(err)
		}
		for batch := range 6 {
			for i := range 40 {
				w.Append(Event{Kind: KindFrame, Lane: Lane(1 + i%3), Data: junk(100)})
			}
			seq := w.Reserve()
			if name != "c" || batch < 5 {
				ex, err := exchange.Marshal(&exchange.Exchange{Method: "POST", URL: "http://llm/v1", Status: 200, RequestBody: junk(200)})
				if err != nil {
					t.Fatal(err)
				}
				w.Append(Event{Seq: seq, Kind: KindExchange, Lane: LaneLLM, Data: ex})
			}
			if err := w.Flush(); err != nil {
				t.Fatal(err)
			}
		}
		if name == "b" {
			if err := w.PutBlob(SnapshotBlob, junk(3000)); err != nil {
				t.Fatal(err)
			}
		}
		if name != "c" {
			w.Update(func(r *Recording) { r.Done = true })
		}
		if err := w.Finish(); err != nil {
			t.Fatal(err)
		}
	}
}

// updateFixture rewrites testdata/damage-fixture.db, the store the damage
// tests damage.
var updateFixture = flag.Bool("update-fixture", false, "rewrite testdata/damage-fixture.db from damageFixture")

// fixtureFile is a damageFixture kept in the repository: a store built
// anew would place its pages by the timing of its commits, and a fuzz
// input, an offset and bytes to write there, would damage another page
// of each. Rebuild it with go test -run TestDamageFixture -update-fixture
// when the store's layout changes.
const fixtureFile = "testdata/damage-fixture.db"

// fixtureBytes is the contents of fixtureFile, read once.
var fixtureBytes = func() func(t testing.TB) []byte {
	var b []byte
	return func(t testing.TB) []byte {
		if b == nil {
			var err error
			if b, err = os.ReadFile(fixtureFile); err != nil {
				t.Fatalf("%v (go test -run TestDamageFixture -update-fixture makes it)", err)
			}
		}
		return b
	}
}()

// TestDamageFixture checks that fixtureFile is a damageFixture of this
// version of the store, and rewrites it with -update-fixture.
func TestDamageFixture(t *testing.T) {
	if *updateFixture {
		path := filepath.Join(t.TempDir(), "fixture.db")
		damageFixture(t, path)
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(fixtureFile, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	path := copyFixture(t, t.TempDir())
	if ps := checkProblems(t, path); len(ps) != 0 {
		t.Errorf("Check of the fixture: %v, want none", ps)
	}
	s, err := Open(path, &Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	recs, err := s.List()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range recs {
		n := 0
		if err := s.Events(r.Name, func(Event) error { n++; return nil }); err != nil {
			t.Errorf("Events of %s: %v", r.Name, err)
		}
		got = append(got, fmt.Sprintf("%s: %d events, done %v, snapshot %v", r.Name, n, r.Done, r.Snapshot))
	}
	want := []string{"a: 246 events, done true, snapshot false", "b: 246 events, done true, snapshot true", "c: 245 events, done false, snapshot false"}
	if !slices.Equal(got, want) {
		t.Errorf("the fixture holds %q, want %q (rebuild it with -update-fixture)", got, want)
	}
}

// copyFixture writes a fresh copy of the fixture and returns its path.
func copyFixture(t testing.TB, dir string) string {
	t.Helper()
	path := filepath.Join(dir, "damaged.db")
	os.Remove(path)
	if err := os.WriteFile(path, fixtureBytes(t), 0o666); err != nil {
		t.Fatal(err)
	}
	return path
}

// highWater returns the size the newest commit of the fixture needs.
func highWater(t testing.TB, b []byte) int64 {
	m0, m1 := parseMeta(b), parseMeta(b[4096:])
	if m1.txid > m0.txid {
		m0 = m1
	}
	return int64(m0.hwm) * int64(m0.pageSize)
}

// allowed fails t unless err is nil or says the store is damaged, or
// that a recording is not there (a flipped key renames it): damage is
// never a newer format, a lock or anything else.
func allowed(t *testing.T, what string, err error) {
	t.Helper()
	if err == nil || errors.Is(err, ErrNotFound) && !errors.Is(err, ErrUnknownFormat) {
		return
	}
	if !errors.Is(err, ErrDamaged) || errors.Is(err, ErrUnknownFormat) {
		t.Errorf("%s: %v, want nil or ErrDamaged (and never ErrUnknownFormat)", what, err)
		return
	}
	if msg := err.Error(); strings.Contains(msg, "\n") || !strings.HasPrefix(msg, "store ") || !strings.Contains(msg, " is damaged") {
		t.Errorf("%s: %q, want one line \"store ... is damaged ...\"", what, msg)
	}
}

// everyOperation runs every read and write of the store at path and
// reports whether one of them said the store is damaged. None may panic:
// that would end the test binary.
func everyOperation(t *testing.T, path string) (sawDamage bool) {
	t.Helper()
	note := func(what string, err error) {
		t.Helper()
		allowed(t, what, err)
		sawDamage = sawDamage || errors.Is(err, ErrDamaged)
	}
	ro, err := Open(path, &Options{ReadOnly: true, Timeout: -1})
	note("Open read-only", err)
	if err == nil {
		recs, err := ro.List()
		note("List", err)
		for _, rec := range recs {
			if rec.Damage != nil {
				note("List of "+rec.Name, rec.Damage)
			}
		}
		for _, name := range []string{"a", "b", "c"} {
			_, err := ro.Get(name)
			note("Get "+name, err)
			note("Events "+name, ro.Events(name, func(Event) error { return nil }))
			_, err = ro.Blob(name, SnapshotBlob)
			if errors.Is(err, ErrNotFound) {
				err = nil
			}
			note("Blob "+name, err)
		}
		ro.Close()
	}
	rw, err := Open(path, &Options{Timeout: -1})
	note("Open", err)
	if err == nil {
		w, err := rw.Create(Recording{Name: "new"}, true)
		note("Create", err)
		if err == nil {
			for range 50 {
				w.Append(Event{Kind: KindFrame, Lane: LaneAgent, Data: []byte("a new line")})
			}
			note("Finish", w.Finish())
		}
		note("Delete a", rw.Delete("a"))
		note("Close", rw.Close())
	}
	return sawDamage
}

// checkProblems returns the problems Check finds in the store at path.
func checkProblems(t *testing.T, path string) []Problem {
	t.Helper()
	var ps []Problem
	if err := Check(path, nil, func(p Problem) { ps = append(ps, p) }); err != nil {
		t.Fatalf("Check: %v", err)
	}
	return ps
}

// TestHugeHighWater gives the newest meta page, its checksum made right,
// a high-water mark of 2^40 pages (and 2^60, whose bytes overflow an
// int64): Check says the file was cut short and stops there, rather than
// walking and listing the pages the file never had until memory runs out
// (issue 24 §5); every operation answers with the same damage.
func TestHugeHighWater(t *testing.T) {
	dir := t.TempDir()
	for _, pages := range []uint64{1 << 40, 1 << 60} {
		t.Run(fmt.Sprint(pages), func(t *testing.T) {
			path := copyFixture(t, dir)
			if err := damage.SetHighWater(path, pages); err != nil {
				t.Fatal(err)
			}
			ps := checkProblems(t, path)
			if len(ps) == 0 || !strings.Contains(ps[0].What, "cut short") {
				t.Errorf("Check of a meta page claiming %d pages: %v, want first that the file was cut short", pages, ps)
			}
			for _, opts := range []*Options{{ReadOnly: true}, nil} {
				_, err := Open(path, opts)
				if !errors.Is(err, ErrDamaged) || !strings.Contains(err.Error(), "cut short") {
					t.Errorf("Open(%+v): %v, want ErrDamaged saying it was cut short", opts, err)
				}
			}
			everyOperation(t, path)
		})
	}
}

func TestTruncatedStore(t *testing.T) {
	dir := t.TempDir()
	hwm := highWater(t, fixtureBytes(t))
	if hwm <= 40000 {
		t.Fatalf("the fixture needs %d bytes, want more than 40000", hwm)
	}
	for _, size := range []int64{8192, 20000, 40000, hwm - 1} {
		t.Run(fmt.Sprint(size), func(t *testing.T) {
			path := copyFixture(t, dir)
			if err := os.Truncate(path, size); err != nil {
				t.Fatal(err)
			}
			for _, opts := range []*Options{{ReadOnly: true}, nil} {
				_, err := Open(path, opts)
				var de *DamagedError
				if !errors.As(err, &de) || de.Path != path || !strings.Contains(err.Error(), "cut short") {
					t.Errorf("Open(%+v) of a file cut to %d bytes: %v, want a *DamagedError of %s saying it was cut short", opts, size, err, path)
				}
			}
			everyOperation(t, path)
			unlocked(t, path)
			ps := checkProblems(t, path)
			if len(ps) == 0 || !strings.Contains(ps[0].What, "cut short") {
				t.Errorf("Check of a file cut to %d bytes: %v, want first that it was cut short", size, ps)
			}
			// Salvage reads what the pages before the cut hold, faults
			// and all.
			dst := filepath.Join(dir, "salvaged.db")
			os.Remove(dst)
			if _, err := Salvage(path, dst, func(Problem) {}); err != nil {
				t.Fatalf("Salvage: %v", err)
			}
			if ps := checkProblems(t, dst); len(ps) != 0 {
				t.Errorf("Check of the salvaged store: %v, want none", ps)
			}
		})
	}
}

// TestEveryPageDamaged flips 32 bytes at several offsets of every page of
// the fixture and runs every operation: none panics or faults, every
// error says the store is damaged, and Check finds a problem wherever an
// operation found damage.
func TestEveryPageDamaged(t *testing.T) {
	dir := t.TempDir()
	b := fixtureBytes(t)
	pages := highWater(t, b) / 4096
	damagedCases := 0
	for page := int64(2); page < pages; page++ {
		for _, off := range []int64{0, 8, 16, 40, 200, 2048} {
			path := copyFixture(t, dir)
			if err := damage.Flip(path, page*4096+off, 32); err != nil {
				t.Fatal(err)
			}
			t.Run(fmt.Sprintf("page%d+%d", page, off), func(t *testing.T) {
				// Check first: the operations write to the file.
				ps := checkProblems(t, path)
				for _, p := range ps {
					if strings.Contains(p.String(), "\n") {
						t.Errorf("problem %q is not one line", p.String())
					}
				}
				sawDamage := everyOperation(t, path)
				unlocked(t, path)
				if sawDamage {
					damagedCases++
					if len(ps) == 0 {
						t.Errorf("an operation found damage, Check nothing")
					}
				}
			})
		}
	}
	if damagedCases == 0 {
		t.Errorf("no flip of %d pages made an operation find damage", pages-2)
	}
	t.Logf("%d of %d cases found damaged", damagedCases, (pages-2)*6)
}

func TestMetaFallbackWarns(t *testing.T) {
	dir := t.TempDir()
	path := copyFixture(t, dir)
	var warnings []error
	warn := func(err error) { warnings = append(warnings, err) }
	s, err := Open(path, &Options{ReadOnly: true, Warn: warn})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	if len(warnings) != 0 {
		t.Fatalf("warnings of an intact store: %v", warnings)
	}
	if ps := checkProblems(t, path); len(ps) != 0 {
		t.Fatalf("Check of an intact store: %v", ps)
	}

	newest, txid, err := damage.NewestMeta(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := damage.BreakMeta(path, newest); err != nil {
		t.Fatal(err)
	}
	s, err = Open(path, &Options{ReadOnly: true, Warn: warn})
	if err != nil {
		t.Fatalf("Open with the newest meta page damaged: %v", err)
	}
	s.Close()
	want := fmt.Sprintf("its newest meta page (page %d) is damaged; opened the previous commit (txid %d), so the last commit (txid %d) is lost", newest, txid-1, txid)
	if len(warnings) != 1 || !errors.Is(warnings[0], ErrDamaged) || !strings.Contains(warnings[0].Error(), want) || !strings.HasPrefix(warnings[0].Error(), "store "+path) {
		t.Errorf("warnings: %v, want one ErrDamaged of %s saying %q", warnings, path, want)
	}
	ps := checkProblems(t, path)
	if len(ps) == 0 || !strings.Contains(ps[0].What, fmt.Sprintf("txid %d), is damaged: that commit is lost", txid)) {
		t.Errorf("Check: %v, want the lost commit first", ps)
	}

	// The older meta page damaged: nothing is lost, but it is said.
	path = copyFixture(t, dir)
	warnings = nil
	if err := damage.BreakMeta(path, 1-newest); err != nil {
		t.Fatal(err)
	}
	s, err = Open(path, &Options{ReadOnly: true, Warn: warn})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	if len(warnings) != 1 || !strings.Contains(warnings[0].Error(), "nothing is lost") {
		t.Errorf("warnings: %v, want one saying nothing is lost", warnings)
	}

	// Both: bbolt cannot open it, which is damage, not another program's
	// file.
	if err := damage.BreakMeta(path, newest); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(path, &Options{ReadOnly: true}); !errors.Is(err, ErrDamaged) || errors.Is(err, ErrNotStore) {
		t.Errorf("Open with both meta pages damaged: %v, want ErrDamaged", err)
	}
	if ps := checkProblems(t, path); len(ps) != 1 || !strings.Contains(ps[0].What, "both meta pages") {
		t.Errorf("Check with both meta pages damaged: %v, want one problem saying so", ps)
	}
}

func TestDamagedMetadataListed(t *testing.T) {
	dir := t.TempDir()
	path := copyFixture(t, dir)
	off, size, err := damage.Value(path, []string{"recordings", "b"}, metaKey)
	if err != nil {
		t.Fatal(err)
	}
	if err := damage.Flip(path, off+int64(size)/2, 8); err != nil {
		t.Fatal(err)
	}
	s, err := Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	recs, err := s.List()
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	var names []string
	for _, r := range recs {
		names = append(names, r.Name)
		var de *DamagedError
		switch {
		case r.Name == "b" && (!errors.As(r.Damage, &de) || de.Recording != "b" || de.Where != "metadata"):
			t.Errorf("b's Damage: %v, want a *DamagedError of b's metadata", r.Damage)
		case r.Name != "b" && r.Damage != nil:
			t.Errorf("%s's Damage: %v, want none", r.Name, r.Damage)
		}
	}
	slices.Sort(names)
	if !slices.Equal(names, []string{"a", "b", "c"}) {
		t.Errorf("List: %v, want a, b and c", names)
	}
	if _, err := s.Get("b"); !errors.Is(err, ErrDamaged) || !strings.Contains(err.Error(), `recording "b", metadata`) {
		t.Errorf("Get b: %v, want ErrDamaged at b's metadata", err)
	}
	if err := s.Events("b", func(Event) error { return nil }); !errors.Is(err, ErrDamaged) {
		t.Errorf("Events b: %v, want ErrDamaged", err)
	}
	ps := checkProblems(t, path)
	if len(ps) != 1 || ps[0].Recording != "b" || !strings.Contains(ps[0].What, "metadata") {
		t.Errorf("Check: %v, want one problem, of b's metadata", ps)
	}
	if err := s.Delete("b"); err != nil {
		t.Fatalf("Delete of the damaged b: %v", err)
	}
	if recs, err := s.List(); err != nil || len(recs) != 2 {
		t.Errorf("List after Delete b: %v, %v; want a and c", recs, err)
	}
	if ps := checkProblems(t, path); len(ps) != 0 {
		t.Errorf("Check after Delete b: %v, want none", ps)
	}
}

// secondBlock returns the Seq of the second frame block of the named
// recording.
func secondBlock(t *testing.T, path, name string) uint64 {
	t.Helper()
	s, err := Open(path, &Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, v := range layout(t, s, name) {
		if v.Enc == blockEncoding && v.Seq > 1 {
			return v.Seq
		}
	}
	t.Fatalf("recording %s has no frame block after its first", name)
	return 0
}

func TestDamagedBlockAndSalvage(t *testing.T) {
	dir := t.TempDir()
	path := copyFixture(t, dir)
	seq := secondBlock(t, path, "a")
	off, size, err := damage.Value(path, []string{"recordings", "a", "events"}, seqKey(seq))
	if err != nil {
		t.Fatal(err)
	}
	if err := damage.Flip(path, off+int64(size)/2, 32); err != nil {
		t.Fatal(err)
	}
	s, err := Open(path, &Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	var read []uint64
	err = s.Events("a", func(e Event) error {
		read = append(read, e.Seq)
		return nil
	})
	s.Close()
	var de *DamagedError
	if !errors.As(err, &de) || errors.Is(err, ErrUnknownFormat) || de.Recording != "a" || de.Seq != seq {
		t.Fatalf("Events over a damaged frame block: %v, want a *DamagedError of a, event %d, never ErrUnknownFormat", err, seq)
	}
	if len(read) == 0 || read[len(read)-1] != seq-1 {
		t.Errorf("Events passed up to event %v, want every one before %d", read[len(read)-1:], seq)
	}
	ps := checkProblems(t, path)
	if len(ps) != 1 || ps[0].Recording != "a" || ps[0].Seq != seq {
		t.Errorf("Check: %v, want one problem of a, event %d", ps, seq)
	}
	if ps := checkProblems(t, path); len(ps) != 1 || !strings.HasPrefix(ps[0].String(), fmt.Sprintf(`recording "a", event %d: `, seq)) {
		t.Errorf("Problem.String: %v, want it to name the recording and the event", ps)
	}

	dst := filepath.Join(dir, "salvaged.db")
	res, err := Salvage(path, dst, func(Problem) {})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(res.Whole, []string{"b", "c"}) || !slices.Equal(res.Partial, []string{"a"}) || len(res.Lost) != 0 {
		t.Errorf("Salvage: %+v, want b and c whole, a in part", res)
	}
	if ps := checkProblems(t, dst); len(ps) != 0 {
		t.Errorf("Check of the salvaged store: %v, want none", ps)
	}
	out, err := Open(dst, &Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	a := mustGet(t, out, "a")
	if !strings.Contains(a.Salvaged, fmt.Sprintf("events from %d on do not read", seq)) || a.Frames+a.Exchanges != int(seq-1) {
		t.Errorf("salvaged a: Salvaged %q, %d frames and %d exchanges; want events from %d on lost, %d events kept", a.Salvaged, a.Frames, a.Exchanges, seq, seq-1)
	}
	var got []uint64
	if err := out.Events("a", func(e Event) error {
		got = append(got, e.Seq)
		return nil
	}); err != nil || !slices.Equal(got, read) {
		t.Errorf("salvaged a's events: %v, %v; want %v", got, err, read)
	}
	if b := mustGet(t, out, "b"); b.Salvaged != "" || !b.Snapshot || !b.Done {
		t.Errorf("salvaged b: %+v, want it as it was", b)
	}
	if _, err := out.Blob("b", SnapshotBlob); err != nil {
		t.Errorf("salvaged b's snapshot: %v", err)
	}
	if c := mustGet(t, out, "c"); c.Salvaged != "" || c.Done {
		t.Errorf("salvaged c: %+v, want it as it was, interrupted", c)
	}

	// Never over an existing file.
	before, _ := os.ReadFile(dst)
	if _, err := Salvage(path, dst, func(Problem) {}); !errors.Is(err, fs.ErrExist) {
		t.Errorf("Salvage into an existing file: %v, want fs.ErrExist", err)
	}
	if after, _ := os.ReadFile(dst); !bytes.Equal(before, after) {
		t.Errorf("Salvage into an existing file changed it")
	}
}

func TestCheckIntact(t *testing.T) {
	path := copyFixture(t, t.TempDir())
	if ps := checkProblems(t, path); len(ps) != 0 {
		t.Errorf("Check of the fixture: %v, want none", ps)
	}
	var ps []Problem
	if err := Check(path, &CheckOptions{Names: []string{"b"}}, func(p Problem) { ps = append(ps, p) }); err != nil || len(ps) != 0 {
		t.Errorf("Check of b: %v, %v", ps, err)
	}
	if err := Check(path, &CheckOptions{Names: []string{"nosuch"}}, func(Problem) {}); !errors.Is(err, ErrNotFound) {
		t.Errorf("Check of no such recording: %v, want ErrNotFound", err)
	}
	if err := Check(filepath.Join(t.TempDir(), "missing.db"), nil, func(Problem) {}); !errors.Is(err, ErrNoStore) {
		t.Errorf("Check of no file: %v, want ErrNoStore", err)
	}
	text := filepath.Join(t.TempDir(), "text")
	os.WriteFile(text, bytes.Repeat([]byte("not a store\n"), 1000), 0o666)
	if err := Check(text, nil, func(Problem) {}); !errors.Is(err, ErrNotStore) {
		t.Errorf("Check of a text file: %v, want ErrNotStore", err)
	}
}

// TestCheckFindsLogicalDamage puts values that bbolt keeps well but that
// are wrong for the store: a gap in the Seqs of a Done recording,
// counters that do not match, an exchange that does not decode.
func TestCheckFindsLogicalDamage(t *testing.T) {
	path := copyFixture(t, t.TempDir())
	s, err := Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	bad := mustEncodeEvent(t, Event{Kind: KindExchange, Lane: LaneLLM, Data: []byte("{not json")})
	if err := (testDB{s}).Update(func(tx *bolt.Tx) error {
		eb := tx.Bucket(recordingsBucket).Bucket([]byte("a")).Bucket(eventsBucket)
		k, v := eb.Cursor().Last()
		seq := binary.BigEndian.Uint64(k)
		if err := eb.Put(seqKey(seq+5), bytes.Clone(v)); err != nil {
			return err
		}
		return eb.Put(seqKey(seq+10), bad)
	}); err != nil {
		t.Fatal(err)
	}
	ps := checkProblems(t, path)
	var text []string
	for _, p := range ps {
		text = append(text, p.String())
	}
	all := strings.Join(text, "\n")
	for _, want := range []string{"events missing", "decoding exchange", "metadata counts"} {
		if !strings.Contains(all, want) {
			t.Errorf("Check: %q, want a problem with %q", all, want)
		}
	}
}

// TestGuardTurnsFaultsIntoDamage reads a mapped file past its end, as
// bbolt does a store cut short: SIGBUS, which guard turns into a
// *DamagedError, where it would kill the process.
func TestGuardTurnsFaultsIntoDamage(t *testing.T) {
	path := filepath.Join(t.TempDir(), "mapped")
	if err := os.WriteFile(path, make([]byte, 2*os.Getpagesize()), 0o666); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	m, err := syscall.Mmap(int(f.Fd()), 0, 2*os.Getpagesize(), syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Munmap(m)
	if err := os.Truncate(path, 0); err != nil {
		t.Fatal(err)
	}
	var b byte
	recovered, err := guard(func() error {
		b = m[os.Getpagesize()+1]
		return nil
	})
	if !recovered || !errors.Is(err, ErrDamaged) || !strings.Contains(err.Error(), "a read of the mapped file failed") {
		t.Errorf("guard of a read past the end of a mapped file: %v, %v (read %d); want a recovered ErrDamaged", recovered, err, b)
	}
}

// TestGuardLetsBugsThrough: a panic of this package's own code is a bug
// to report, not damage, a nil pointer dereference too, which
// SetPanicOnFault makes a fault.
func TestGuardLetsBugsThrough(t *testing.T) {
	type node struct{ next *node }
	for _, tt := range []struct {
		name string
		bug  func()
		want string
	}{
		{"index", func() {
			s := make([]int, len(os.Args))
			_ = s[len(s)]
		}, "index out of range"},
		{"nil pointer", func() {
			var n *node
			_ = n.next.next
		}, "nil pointer dereference"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			defer func() {
				r := recover()
				if err, ok := r.(runtime.Error); !ok || !strings.Contains(err.Error(), tt.want) {
					t.Errorf("recovered %v, want the %s panic", r, tt.want)
				}
			}()
			guard(func() error {
				tt.bug()
				return nil
			})
			t.Errorf("guard returned from a panic of the store's own code")
		})
	}
}

// FuzzDamagedStore writes bytes over the fixture at an offset and runs
// every operation: none may panic, and every error must say the store is
// damaged (or that a recording is not there).
func FuzzDamagedStore(f *testing.F) {
	b := fixtureBytes(f)
	for _, off := range []int64{0, 4096, 2 * 4096, 5*4096 + 100, 9 * 4096, 20*4096 + 16} {
		f.Add(off, []byte("\xff\x00\xff\x00\x12\x34\x56\x78"))
	}
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, off int64, patch []byte) {
		if off < 0 || off >= int64(len(b)) || len(patch) == 0 {
			return
		}
		path := filepath.Join(dir, "fuzz.db")
		mutated := bytes.Clone(b)
		copy(mutated[off:], patch)
		if err := os.WriteFile(path, mutated, 0o666); err != nil {
			t.Fatal(err)
		}
		if err := Check(path, nil, func(Problem) {}); err != nil && !errors.Is(err, ErrNotStore) {
			t.Errorf("Check: %v", err)
		}
		everyOperation(t, path)
		unlocked(t, path)
	})
}

// unlocked fails t if a lock of the store file at path is still held:
// nothing is left holding one once the operations on it have returned,
// whatever they met.
func unlocked(t *testing.T, path string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		t.Errorf("the store's lock is still held after the operations: %v", err)
	}
}

// TestDamagedFreelist: bbolt reads the freelist only to write, and trusts
// it: a write refuses a damaged one, a read does not need it.
func TestDamagedFreelist(t *testing.T) {
	path := copyFixture(t, t.TempDir())
	b := fixtureBytes(t)
	m0, m1 := parseMeta(b), parseMeta(b[4096:])
	if m1.txid > m0.txid {
		m0 = m1
	}
	if m0.freelist == noFreelist {
		t.Fatal("the fixture has no freelist page")
	}
	// The page's flags.
	if err := damage.Flip(path, int64(m0.freelist)*4096+8, 2); err != nil {
		t.Fatal(err)
	}
	_, err := Open(path, nil)
	if !errors.Is(err, ErrDamaged) || !strings.Contains(err.Error(), fmt.Sprintf("at page %d, its freelist: not a freelist page", m0.freelist)) {
		t.Errorf("Open to write: %v, want ErrDamaged at the freelist", err)
	}
	s, err := Open(path, &Options{ReadOnly: true})
	if err != nil {
		t.Fatalf("Open read-only: %v", err)
	}
	defer s.Close()
	if recs, err := s.List(); err != nil || len(recs) != 3 {
		t.Errorf("List: %d recordings, %v; want 3", len(recs), err)
	}
	ps := checkProblems(t, path)
	if len(ps) == 0 || !strings.Contains(ps[0].What, fmt.Sprintf("page %d: unexpected type", m0.freelist)) {
		t.Errorf("Check: %v, want the freelist page first", ps)
	}
}

// TestDeleteDamagedRecording: bbolt cannot free the pages of a recording
// whose pages are damaged; Delete takes it out of the recordings all the
// same, and Check still says the file keeps damaged pages.
func TestDeleteDamagedRecording(t *testing.T) {
	dir := t.TempDir()
	path := copyFixture(t, dir)
	off, _, err := damage.Value(path, []string{"recordings", "b", "events"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := damage.Flip(path, off/4096*4096, 32); err != nil {
		t.Fatal(err)
	}
	s, err := Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Events("b", func(Event) error { return nil }); !errors.Is(err, ErrDamaged) {
		t.Fatalf("Events of b with a page flipped: %v, want ErrDamaged", err)
	}
	if err := s.Delete("b"); err != nil {
		t.Fatalf("Delete of the damaged b: %v", err)
	}
	recs, err := s.List()
	if err != nil || len(recs) != 2 || recs[0].Name != "a" || recs[1].Name != "c" {
		t.Errorf("List after Delete b: %v, %v; want a and c", recs, err)
	}
	if _, err := s.Get("b"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Get b after Delete: %v, want ErrNotFound", err)
	}
	// A new b, and its Delete, as of any recording.
	w := mustCreate(t, s, Recording{Name: "b"})
	w.Append(Event{Kind: KindFrame, Lane: LaneAgent, Data: []byte("again")})
	if err := w.Finish(); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete("b"); err != nil {
		t.Errorf("Delete of a new b: %v", err)
	}
	all := ""
	for _, p := range checkProblems(t, path) {
		all += p.String() + "\n"
	}
	if !strings.Contains(all, "keeps the pages of damaged recordings that rm removed") || !strings.Contains(all, "says it is page") {
		t.Errorf("Check after Delete: %q, want the kept pages and their damage", all)
	}
	dst := filepath.Join(dir, "salvaged.db")
	res, err := Salvage(path, dst, func(Problem) {})
	if err != nil || !slices.Equal(res.Whole, []string{"a", "c"}) || len(res.Partial)+len(res.Lost) != 0 {
		t.Errorf("Salvage: %+v, %v; want a and c whole", res, err)
	}
	if ps := checkProblems(t, dst); len(ps) != 0 {
		t.Errorf("Check of the salvaged store: %v, want none", ps)
	}
}

// eventsRoot returns the root page of the events bucket of the named
// recording in the store file at path.
func eventsRoot(t *testing.T, path, name string) uint64 {
	t.Helper()
	db, err := bolt.Open(path, 0, &bolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var root uint64
	db.View(func(tx *bolt.Tx) error {
		root = uint64(tx.Bucket(recordingsBucket).Bucket([]byte(name)).Bucket(eventsBucket).Root())
		return nil
	})
	return root
}

// TestCyclicPages: a branch page whose child is itself, or whose leaf is
// made a branch pointing back up, would make bbolt loop for ever (a
// cursor's stack grows until memory runs out; deleting recurses until the
// stack overflows). Every operation says the recording is damaged
// instead, rm takes it out, and the others still read.
func TestCyclicPages(t *testing.T) {
	b := fixtureBytes(t)
	le := binary.LittleEndian
	for _, tc := range []struct {
		name string
		make func(path string, root uint64)
	}{
		{"a branch child is the branch", func(path string, root uint64) {
			patchPage(t, path, root, 16+8, root) // element 0's page id
		}},
		{"a leaf made a branch back to the root", func(path string, root uint64) {
			leaf := le.Uint64(b[root*4096+16+2*16+8:]) // element 2's page
			p := make([]byte, 32)
			le.PutUint64(p, leaf)
			le.PutUint16(p[8:], branchPageFlag)
			le.PutUint16(p[10:], 1)
			le.PutUint64(p[16+8:], root)
			f, err := os.OpenFile(path, os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if _, err := f.WriteAt(p, int64(leaf)*4096); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := copyFixture(t, t.TempDir())
			root := eventsRoot(t, path, "b")
			if b[root*4096+8] != branchPageFlag {
				t.Fatalf("the events of b have no branch page at their root %d", root)
			}
			tc.make(path, root)
			finished := make(chan struct{})
			go func() {
				defer close(finished)
				cyclicOperations(t, path)
			}()
			select {
			case <-finished:
			case <-time.After(2 * time.Minute):
				// Not a timing check: the operations take milliseconds,
				// and without walkable they never end.
				panic("operations on a store with a cycle of pages did not end")
			}
		})
	}
}

func cyclicOperations(t *testing.T, path string) {
	s, err := Open(path, &Options{Timeout: -1})
	if err != nil {
		t.Errorf("Open: %v", err)
		return
	}
	defer s.Close()
	recs, err := s.List()
	if err != nil || len(recs) != 3 {
		t.Errorf("List: %d recordings, %v; want 3", len(recs), err)
	}
	err = s.Events("b", func(Event) error { return nil })
	var de *DamagedError
	if !errors.As(err, &de) || de.Recording != "b" || !strings.Contains(de.Where, "page ") {
		t.Errorf("Events of b: %v, want ErrDamaged at a page of b", err)
	}
	if err := s.Events("a", func(Event) error { return nil }); err != nil {
		t.Errorf("Events of a: %v, want none", err)
	}
	ps := checkProblems(t, path)
	if len(ps) == 0 || !slices.ContainsFunc(ps, func(p Problem) bool { return p.Recording == "b" }) {
		t.Errorf("Check: %v, want a problem of b", ps)
	}
	if err := s.Delete("b"); err != nil {
		t.Errorf("Delete of b: %v", err)
	}
	recs, err = s.List()
	if err != nil || len(recs) != 2 {
		t.Errorf("List after rm b: %d recordings, %v; want 2", len(recs), err)
	}
	dst := filepath.Join(filepath.Dir(path), "salvaged.db")
	if _, err := Salvage(path, dst, func(Problem) {}); err != nil {
		t.Errorf("Salvage: %v", err)
	}
}

// patchPage writes v at offset off of page id of the store file at path.
func patchPage(t *testing.T, path string, id uint64, off int, v uint64) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var p [8]byte
	binary.LittleEndian.PutUint64(p[:], v)
	if _, err := f.WriteAt(p[:], int64(id)*4096+int64(off)); err != nil {
		t.Fatal(err)
	}
}

// TestQuoteKey: a key that damage made megabytes long is said in a line.
func TestQuoteKey(t *testing.T) {
	for _, tc := range []struct {
		key  []byte
		want string
	}{
		{[]byte("meta"), `"meta"`},
		{[]byte{0xff, 0}, `"\xff\x00"`},
		{bytes.Repeat([]byte("k"), 6<<20), `"` + strings.Repeat("k", 64) + `"… (6291456 bytes)`},
	} {
		if got := quoteKey(tc.key); got != tc.want {
			t.Errorf("quoteKey of %d bytes = %.80s, want %.80s", len(tc.key), got, tc.want)
		}
	}
}

// TestShortEventKey: an events key that is not 8 bytes long, where Events
// starts reading, is damage. It was read as a Seq, a panic of acptap's own
// code, which left the store's lock held (found by FuzzDamagedStore).
func TestShortEventKey(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.db")
	s, err := Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	w, err := s.Create(Recording{Name: "r"}, false)
	if err != nil {
		t.Fatal(err)
	}
	w.Append(Event{Kind: KindFrame, Lane: LaneAgent, Data: []byte("a line")})
	if err := w.Finish(); err != nil {
		t.Fatal(err)
	}
	s.Close()
	db, err := bolt.Open(path, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		eb := tx.Bucket(recordingsBucket).Bucket([]byte("r")).Bucket(eventsBucket)
		c := eb.Cursor()
		for k, _ := c.First(); k != nil; k, _ = c.Next() {
			if err := c.Delete(); err != nil {
				return err
			}
		}
		return eb.Put([]byte("\x00\x00\x00\x00\x00\x00\x02"), []byte("x"))
	})
	db.Close()
	if err != nil {
		t.Fatal(err)
	}
	s, err = Open(path, &Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	err = s.Events("r", func(Event) error { return nil })
	if !errors.Is(err, ErrDamaged) || !strings.Contains(err.Error(), "stray key") {
		t.Errorf("Events over a 7-byte key: %v, want ErrDamaged saying it is a stray key", err)
	}
	s.Close()
	unlocked(t, path)
}

// TestBugPanicLetsGoOfTheLock: a panic of acptap's own code inside a
// transaction goes on up, as guard lets it, and does not leave the file's
// lock held on its way.
func TestBugPanicLetsGoOfTheLock(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.db")
	s, err := Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, write := range []bool{false, true} {
		func() {
			defer func() {
				if r := recover(); r == nil {
					t.Errorf("write %v: the panic was swallowed", write)
				}
			}()
			bug := func(*bolt.Tx) error {
				s := make([]int, len(os.Args))
				_ = s[len(s)]
				return nil
			}
			if write {
				s.update("test", "", bug)
			} else {
				s.view("test", "", bug)
			}
		}()
		unlocked(t, path)
	}
}

// TestCheckFindsEventsOutOfOrder: a recording whose events' times go back
// along the Seqs by more than the clock's resolution (as an older acptap
// record numbered frames when it framed them, after exchanges whose
// requests came later) is reported, naming the first such event; one
// whose times only stay level is not.
func TestCheckFindsEventsOutOfOrder(t *testing.T) {
	path := filepath.Join(t.TempDir(), "order.db")
	s, err := Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	frame := func(at time.Duration) Event {
		return Event{Kind: KindFrame, Lane: LaneAgent, Offset: at, Data: []byte("{}")}
	}
	for name, offsets := range map[string][]time.Duration{
		"ordered":  {time.Millisecond, 2 * time.Millisecond, 2 * time.Millisecond, 2*time.Millisecond + 500*time.Nanosecond, 3 * time.Millisecond},
		"disorder": {time.Millisecond, 5 * time.Millisecond, 3 * time.Millisecond, 4 * time.Millisecond, 6 * time.Millisecond},
	} {
		w, err := s.Create(Recording{Name: name}, false)
		if err != nil {
			t.Fatal(err)
		}
		for i, at := range offsets {
			if i == 2 {
				data, err := exchange.Marshal(&exchange.Exchange{Method: "POST", URL: "http://llm.test/v1"})
				if err != nil {
					t.Fatal(err)
				}
				w.Append(Event{Kind: KindExchange, Lane: LaneLLM, Offset: at, Data: data})
				continue
			}
			w.Append(frame(at))
		}
		w.Update(func(r *Recording) { r.Done = true })
		if err := w.Finish(); err != nil {
			t.Fatal(err)
		}
	}
	s.Close()
	var got []string
	for _, p := range checkProblems(t, path) {
		got = append(got, p.String())
	}
	want := `recording "disorder", event 3: its order contradicts its times: it comes after event 2 but happened 2ms before it (and 1 more event);`
	if len(got) != 1 || !strings.HasPrefix(got[0], want) {
		t.Errorf("Check: %q, want one problem starting %q", got, want)
	}
}
