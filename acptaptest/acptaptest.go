// Package acptaptest replays acptap recordings as Go subtests.
//
// A project that writes its agent in Go records sessions with `acptap
// record` and replays them from its own tests:
//
//	func TestRecordings(t *testing.T) {
//		acptaptest.Replay(t, "testdata/acptap.db", nil)
//	}
//
// The path is a store file or a directory of recordings exported with
// `acptap export`, as the CLI's --store. Each recording is a subtest
// (t.Run with its name, in parallel), and a divergence is reported with
// t.Errorf in the words of `acptap replay`, at the line that called
// Replay. `go test -update` rewrites the expected agent stream of the
// recordings whose only divergence is the agent's output, as `acptap
// replay --update` does. `go test -acptap.record`, with the keys the
// agent needs in the environment, records every recording again against
// the live LLM instead of replaying it, as `acptap rerecord --accept`
// does: the keyed half of a snapshot suite whose keyless half runs in
// every CI build.
package acptaptest

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/acptap/acptap/fixture"
	"github.com/acptap/acptap/replay"
	"github.com/acptap/acptap/rerecord"
	"github.com/acptap/acptap/store"
)

// updateFlag is the name of the flag that asks for --update, and
// recordFlag of the one that asks for re-recording.
const (
	updateFlag = "update"
	recordFlag = "acptap.record"
)

func init() {
	// A test binary that defines -update itself (for golden files, say)
	// keeps its own, and Replay honours it.
	if flag.Lookup(updateFlag) == nil {
		flag.Bool(updateFlag, false, "acptaptest: rewrite the expected agent stream of recordings whose only divergence is the agent's output")
	}
	flag.Bool(recordFlag, false, "acptaptest: record the recordings again against the live LLM (the agent's keys in the environment) instead of replaying them")
}

// updating reports whether the test binary runs with -update.
func updating() bool { return boolFlag(updateFlag) }

// recording reports whether the test binary runs with -acptap.record.
func recording() bool { return boolFlag(recordFlag) }

func boolFlag(name string) bool {
	f := flag.Lookup(name)
	if f == nil {
		return false
	}
	g, ok := f.Value.(flag.Getter)
	if !ok {
		return false
	}
	on, _ := g.Get().(bool)
	return on
}

// Options configure Replay and Check. The zero value replays every
// recording in the store with its recorded agent command, in parallel.
type Options struct {
	// Names are the recordings to replay. If empty, every recording in
	// the store.
	Names []string
	// Replay configures each replay (the agent command, its environment,
	// timeouts, request drift, ...). Its zero value replays the recorded
	// command with replay's defaults.
	Replay replay.Options
	// Serial runs the recordings one after another rather than as
	// parallel subtests.
	Serial bool
	// Update rewrites the expected agent stream of a recording whose only
	// divergence is the agent's output. Replay also does so when the test
	// binary runs with -update.
	Update bool
	// Record records each recording again against the live LLM, and
	// replaces it, instead of replaying it (see package rerecord); Replay
	// also does so when the test binary runs with -acptap.record.
	// Rerecord configures it.
	Record   bool
	Rerecord rerecord.Options
}

// An Outcome is how the replay of one recording ended.
type Outcome int

const (
	Passed     Outcome = iota // the replay was equal
	Failed                    // it diverged (and was not updated), or its re-recording failed
	Updated                   // it diverged in the agent's output only, and Update rewrote it
	Rerecorded                // Record recorded it again and replaced it
)

func (o Outcome) String() string {
	switch o {
	case Passed:
		return "PASS"
	case Updated:
		return "UPDATED"
	case Rerecorded:
		return "RERECORDED"
	}
	return "FAIL"
}

// A Report is the outcome of the replay of one recording.
type Report struct {
	Name    string
	Outcome Outcome
	// Text is what `acptap replay` prints for it.
	Text   string
	Result *replay.Result
}

// Replay replays the recordings of the store at path, each as a subtest
// of t named after it, and fails each subtest whose replay diverges with
// the report `acptap replay` prints. A store that cannot be opened, or a
// name it lacks, fails t itself. A nil opts is the zero Options.
func Replay(t *testing.T, path string, opts *Options) {
	t.Helper()
	o := options(opts)
	o.Update = o.Update || updating()
	o.Record = o.Record || recording()
	src, names, err := open(t.Context(), path, o)
	if err != nil {
		t.Fatal(err)
	}
	// The store closes once every subtest, parallel ones included, has
	// ended: t's cleanups run after its parallel subtests.
	t.Cleanup(func() { src.close() })
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			// A helper as the whole subtest: its failures are reported
			// at the line that called Replay.
			t.Helper()
			if !o.Serial {
				t.Parallel()
			}
			r, err := check(t.Context(), src, name, o)
			switch {
			case err != nil:
				t.Fatal(err)
			case r.Outcome == Failed:
				t.Errorf("%s", strings.TrimSuffix(r.Text, "\n"))
			case r.Outcome == Updated, r.Outcome == Rerecorded:
				t.Logf("%s", strings.TrimSuffix(r.Text, "\n"))
			}
		})
	}
}

// Check replays the recordings of the store at path and returns their
// reports in the order of opts.Names (or the store's), without a
// testing.T. A nil opts is the zero Options. The replays run concurrently
// unless opts.Serial. The error is about the store or a replay that could
// not run at all, never a divergence.
func Check(ctx context.Context, path string, opts *Options) ([]Report, error) {
	o := options(opts)
	src, names, err := open(ctx, path, o)
	if err != nil {
		return nil, err
	}
	defer src.close()
	reports := make([]Report, len(names))
	errs := make([]error, len(names))
	var wg sync.WaitGroup
	for i, name := range names {
		run := func() {
			r, err := check(ctx, src, name, o)
			if r != nil {
				reports[i] = *r
			}
			errs[i] = err
		}
		if o.Serial {
			run()
		} else {
			wg.Go(run)
		}
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return reports, nil
}

func options(opts *Options) Options {
	if opts == nil {
		return Options{}
	}
	return *opts
}

// source is the store the recordings are read from: a store file, or a
// directory of exported recordings loaded into a temporary store.
type source struct {
	st     *store.Store
	loaded *fixture.Loaded // for a directory
	// mu serializes writing recordings back to their directories.
	mu sync.Mutex
}

func (s *source) close() error {
	if s.loaded != nil {
		return s.loaded.Close()
	}
	return s.st.Close()
}

// save writes a changed recording back to its directory; nothing for a
// store file.
func (s *source) save(ctx context.Context, name string) error {
	if s.loaded == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.loaded.Save(ctx, name)
}

// open opens the store (a file, for writing only when updating or
// re-recording, or a directory of exported recordings) and returns the
// names to replay, each checked to be in it.
func open(ctx context.Context, path string, o Options) (*source, []string, error) {
	src := &source{}
	if fi, err := os.Stat(path); err == nil && fi.IsDir() {
		if src.loaded, err = fixture.Load(ctx, path, o.Names); err != nil {
			return nil, nil, fmt.Errorf("acptaptest: %w", err)
		}
		src.st = src.loaded.Store
	} else {
		st, err := store.Open(path, &store.Options{ReadOnly: !o.Update && !o.Record})
		if err != nil {
			return nil, nil, fmt.Errorf("acptaptest: %w", err)
		}
		src.st = st
	}
	st := src.st
	names := o.Names
	if len(names) == 0 {
		recs, err := st.List()
		if err != nil {
			src.close()
			return nil, nil, fmt.Errorf("acptaptest: %w", err)
		}
		for _, r := range recs {
			names = append(names, r.Name)
		}
		if len(names) == 0 {
			src.close()
			return nil, nil, fmt.Errorf("acptaptest: no recordings in %s; record one with acptap record", path)
		}
	}
	for _, name := range names {
		if _, err := st.Get(name); err != nil {
			src.close()
			return nil, nil, fmt.Errorf("acptaptest: %w", err)
		}
	}
	return src, names, nil
}

// check replays one recording and, when asked, updates it; or, with
// Record, records it again.
func check(ctx context.Context, src *source, name string, o Options) (*Report, error) {
	if o.Record {
		return rerecordOne(ctx, src, name, o)
	}
	st := src.st
	res, err := replay.Run(ctx, st, name, o.Replay)
	if err != nil {
		return nil, fmt.Errorf("acptaptest: replay %s: %w", name, err)
	}
	r := &Report{Name: name, Result: res, Outcome: Passed}
	var ro replay.ReportOptions
	if !res.Equal() {
		r.Outcome = Failed
		if o.Update {
			frames, err := replay.Update(st, res)
			switch {
			case err == nil:
				r.Outcome = Updated
				ro.Updated, ro.UpdatedFrames = true, frames
				if err := src.save(ctx, name); err != nil {
					return nil, fmt.Errorf("acptaptest: update %s: %w", name, err)
				}
			case errors.Is(err, replay.ErrNotUpdatable):
				ro.NotUpdated = err
			default:
				return nil, fmt.Errorf("acptaptest: replay %s: update: %w", name, err)
			}
		}
	}
	var text strings.Builder
	replay.WriteReport(&text, res, ro)
	r.Text = text.String()
	return r, nil
}

// rerecordOne records name again against the live LLM, in a store of
// its own, and replaces the recording with it when the session went as
// the recording's did (else the recording stays, and the report says
// why); the report says what changed, in replay's words.
func rerecordOne(ctx context.Context, src *source, name string, o Options) (*Report, error) {
	dir, err := os.MkdirTemp("", "acptaptest-rerecord-")
	if err != nil {
		return nil, fmt.Errorf("acptaptest: rerecord %s: %w", name, err)
	}
	defer os.RemoveAll(dir)
	pending, err := store.Open(filepath.Join(dir, "pending.db"), nil)
	if err != nil {
		return nil, fmt.Errorf("acptaptest: rerecord %s: %w", name, err)
	}
	defer pending.Close()
	res, err := rerecord.Run(ctx, src.st, name, pending, o.Rerecord)
	if err != nil {
		return nil, fmt.Errorf("acptaptest: %w", err)
	}
	r := &Report{Name: name, Outcome: Rerecorded}
	if res.Err != nil {
		r.Outcome = Failed
		r.Text = fmt.Sprintf("RERECORD FAILED %s: %v; the recording is unchanged\n", name, res.Err)
		return r, nil
	}
	diff, err := replay.DiffStores(src.st, name, pending, name, replay.DiffOptions{LabelA: "previous", LabelB: "new"})
	if err != nil {
		return nil, fmt.Errorf("acptaptest: rerecord %s: %w", name, err)
	}
	rec, err := fixture.FromStore(pending, name)
	if err != nil {
		return nil, fmt.Errorf("acptaptest: rerecord %s: %w", name, err)
	}
	src.mu.Lock()
	err = fixture.Put(ctx, src.st, name, rec, true)
	src.mu.Unlock()
	if err != nil {
		return nil, fmt.Errorf("acptaptest: rerecord %s: replacing the recording: %w", name, err)
	}
	if err := src.save(ctx, name); err != nil {
		return nil, fmt.Errorf("acptaptest: rerecord %s: %w", name, err)
	}
	var text strings.Builder
	fmt.Fprintf(&text, "RERECORDED %s in %s\n", name, res.Elapsed.Round(time.Millisecond))
	replay.WriteDiffReport(&text, diff, replay.ReportOptions{})
	r.Text = text.String()
	return r, nil
}
