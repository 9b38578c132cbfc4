package driver_test

import (
	"errors"
	"slices"
	"sync"
	"testing"

	"github.com/acptap/acptap/lane"

	"github.com/acptap/acptap/internal/testing/testeditor"
	"github.com/acptap/acptap/replay/driver"
)

// source is a lane.Lines over frames that hands out copies and fails
// its failAt-th read (from 1; 0 for never).
type source struct {
	mu     sync.Mutex // guards reads
	frames []lane.Line
	reads  int
	failAt int
}

var errSource = errors.New("source read failed")

func (s *source) Len() int { return len(s.frames) }

func (s *source) Line(i int) (lane.Line, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reads++
	if s.reads == s.failAt {
		return lane.Line{}, errSource
	}
	return lane.Line{Lane: s.frames[i].Lane, Data: slices.Clone(s.frames[i].Data)}, nil
}

// TestNewFromDiscard checks that a Driver reading its frames from a
// Source plays the session as one given them in memory, and that with
// Discard and NoTimeline it keeps neither the lines nor the timeline but
// counts what it received.
func TestNewFromDiscard(t *testing.T) {
	ws := workspace(t)
	args := []string{"--read", "notes.txt", "--junk"}
	frames, _ := record(t, testeditor.Options{Cwd: ws, Prompts: []string{"one", "two"}}, args...)
	want, err := replay(t, driver.New(driver.Options{Recorded: frames, PathMap: map[string]string{ws: t.TempDir()}}), agentEnviron(), args...)
	if err != nil {
		t.Fatal(err)
	}
	src := &source{frames: frames}
	d, err := driver.NewFrom(src, driver.Options{Discard: true, NoTimeline: true, PathMap: map[string]string{ws: t.TempDir()}})
	if err != nil {
		t.Fatal(err)
	}
	planned := src.reads
	if planned != len(frames) {
		t.Errorf("NewFrom read %d frames, want each of the %d once", planned, len(frames))
	}
	got, err := replay(t, d, agentEnviron(), args...)
	if err != nil {
		t.Fatal(err)
	}
	if got.Live != nil || got.Sent != nil || got.Timeline != nil {
		t.Errorf("with Discard and NoTimeline: %d live lines, %d sent, %d steps kept; want none", len(got.Live), len(got.Sent), len(got.Timeline))
	}
	if got.Received != len(want.Live) || want.Received != len(want.Live) {
		t.Errorf("Received = %d with Discard, %d without; want %d, the lines of the run without", got.Received, want.Received, len(want.Live))
	}
	if src.reads == planned {
		t.Error("Run read no frame of the Source")
	}
}

// TestNewFromReadError checks that a frame the Source cannot read fails
// NewFrom when it plans, and the Run when it sends, with the Source's
// error.
func TestNewFromReadError(t *testing.T) {
	ws := workspace(t)
	frames, _ := record(t, testeditor.Options{Cwd: ws, Prompts: []string{"one"}}, "--read", "notes.txt")
	if _, err := driver.NewFrom(&source{frames: frames, failAt: 3}, driver.Options{}); !errors.Is(err, errSource) {
		t.Errorf("NewFrom: got %v, want %v", err, errSource)
	}
	d, err := driver.NewFrom(&source{frames: frames, failAt: len(frames) + 2}, driver.Options{PathMap: map[string]string{ws: t.TempDir()}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := replay(t, d, agentEnviron(), "--read", "notes.txt"); !errors.Is(err, errSource) {
		t.Errorf("Run: got %v, want %v", err, errSource)
	}
}
