// Package acptaptest replays acptap recordings as Go subtests.
//
// A project that writes its agent in Go records sessions with `acptap
// record` and replays them from its own tests:
//
//	func TestRecordings(t *testing.T) {
//		acptaptest.Replay(t, "testdata/acptap.db", nil)
//	}
//
// Each recording is a subtest (t.Run with its name, in parallel), and a
// divergence is reported with t.Errorf in the words of `acptap replay`.
// `go test -update` rewrites the expected agent stream of the recordings
// whose only divergence is the agent's output, as `acptap replay --update`
// does.
package acptaptest

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/acptap/acptap/replay"
	"github.com/acptap/acptap/store"
)

// updateFlag is the name of the flag that asks for --update.
const updateFlag = "update"

func init() {
	// A test binary that defines -update itself (for golden files, say)
	// keeps its own, and Replay honours it.
	if flag.Lookup(updateFlag) == nil {
		flag.Bool(updateFlag, false, "acptaptest: rewrite the expected agent stream of recordings whose only divergence is the agent's output")
	}
}

// updating reports whether the test binary runs with -update.
func updating() bool {
	f := flag.Lookup(updateFlag)
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
}

// An Outcome is how the replay of one recording ended.
type Outcome int

const (
	Passed  Outcome = iota // the replay was equal
	Failed                 // it diverged (and was not updated)
	Updated                // it diverged in the agent's output only, and Update rewrote it
)

func (o Outcome) String() string {
	switch o {
	case Passed:
		return "PASS"
	case Updated:
		return "UPDATED"
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
	st, names, err := open(path, o)
	if err != nil {
		t.Fatal(err)
	}
	// The store closes once every subtest, parallel ones included, has
	// ended: t's cleanups run after its parallel subtests.
	t.Cleanup(func() { st.Close() })
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			if !o.Serial {
				t.Parallel()
			}
			r, err := check(t.Context(), st, name, o)
			switch {
			case err != nil:
				t.Fatal(err)
			case r.Outcome == Failed:
				t.Errorf("%s", strings.TrimSuffix(r.Text, "\n"))
			case r.Outcome == Updated:
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
	st, names, err := open(path, o)
	if err != nil {
		return nil, err
	}
	defer st.Close()
	reports := make([]Report, len(names))
	errs := make([]error, len(names))
	var wg sync.WaitGroup
	for i, name := range names {
		run := func() {
			r, err := check(ctx, st, name, o)
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

// open opens the store, for writing only when updating, and returns the
// names to replay, each checked to be in it.
func open(path string, o Options) (*store.Store, []string, error) {
	st, err := store.Open(path, &store.Options{ReadOnly: !o.Update})
	if err != nil {
		return nil, nil, fmt.Errorf("acptaptest: %w", err)
	}
	names := o.Names
	if len(names) == 0 {
		recs, err := st.List()
		if err != nil {
			st.Close()
			return nil, nil, fmt.Errorf("acptaptest: %w", err)
		}
		for _, r := range recs {
			names = append(names, r.Name)
		}
		if len(names) == 0 {
			st.Close()
			return nil, nil, fmt.Errorf("acptaptest: no recordings in %s; record one with acptap record", path)
		}
	}
	for _, name := range names {
		if _, err := st.Get(name); err != nil {
			st.Close()
			return nil, nil, fmt.Errorf("acptaptest: %w", err)
		}
	}
	return st, names, nil
}

// check replays one recording and, when asked, updates it.
func check(ctx context.Context, st *store.Store, name string, o Options) (*Report, error) {
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
