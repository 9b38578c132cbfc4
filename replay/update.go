package replay

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/acptap/acptap/lane"

	"github.com/acptap/acptap/replay/driver"
	"github.com/acptap/acptap/store"
)

// ErrNotUpdatable means that a replay diverged in a way that rewriting
// the expected agent stream cannot fix (an editor-side failure, an LLM
// request the recording cannot answer, ...), or that the recording
// changed since the replay.
var ErrNotUpdatable = errors.New("cannot update the recording")

// A Step is one event of a replay's timeline.
type Step struct {
	// Lane is lane.Editor for a recorded editor frame the replay
	// sent to the agent, lane.Agent for a line the agent wrote.
	Lane lane.Lane
	// Index is, for an editor frame, its position among the recording's
	// editor frames (0 for the first); for an agent line, its index in
	// Result.Live.
	Index int
}

// timeline fills in res.Timeline, from the driver's, and what Update
// needs to know of the replay.
func (res *Result) timeline(rec *recording, sb *sandbox, drv *driver.Result) {
	ordinal := make([]int, len(rec.frames.lanes)) // frame index → editor ordinal
	editors := 0
	for i, l := range rec.frames.lanes {
		ordinal[i] = editors
		if l == lane.Editor {
			editors++
		}
	}
	res.Timeline = make([]Step, 0, len(drv.Timeline)+len(res.Live)-drv.Received)
	for _, st := range drv.Timeline {
		if st.Lane == lane.Editor {
			st.Index = ordinal[st.Index]
		}
		res.Timeline = append(res.Timeline, Step(st))
	}
	// The lines the driver left: those after the end of the recording.
	for i := drv.Received; i < len(res.Live); i++ {
		res.Timeline = append(res.Timeline, Step{lane.Agent, i})
	}
	// The sandbox's directories go back to the recorded ones: the first
	// session's cwd (all of them map to the workspace), HOME and TMPDIR.
	paths := map[string]string{}
	if cwd := nonEmpty(append(slices.Clone(rec.cwds), rec.meta.Cwd)...); len(cwd) > 0 {
		paths[sb.work] = cwd[0]
	}
	if rec.meta.Home != "" && rec.meta.Home != "/" {
		paths[sb.home] = rec.meta.Home
	}
	if rec.meta.Tmp != "" && rec.meta.Tmp != "/" {
		paths[sb.tmp] = rec.meta.Tmp
	}
	res.restore = drv.Restorer(paths)
}

// Updatable returns nil if Update can make the recording expect what the
// agent did in this replay: when the agent's output is the only
// divergence (or there is none). Otherwise it returns ErrNotUpdatable
// with the first other divergence.
func (res *Result) Updatable() error {
	if res.discarded {
		return fmt.Errorf("%w %q: the replay kept none of the agent's lines (Options.Discard)", ErrNotUpdatable, res.Name)
	}
	if res.restore == nil {
		return fmt.Errorf("%w %q: the result is not one of a replay", ErrNotUpdatable, res.Name)
	}
	if len(res.StdioFaults) > 0 {
		// What the agent did with a broken editor side is never what it
		// is to be expected to do with a whole one.
		return fmt.Errorf("%w %q: the replay broke editor frames (%s); replay it without stdio faults to update it", ErrNotUpdatable, res.Name, res.StdioFaults[0].StdioFault)
	}
	for _, d := range res.Divergences {
		if d.Kind != OutputDiffers {
			return fmt.Errorf("%w %q: rewriting the expected agent stream cannot fix %s; record it again against the live LLM instead: acptap rerecord %s", ErrNotUpdatable, res.Name, d, res.Name)
		}
	}
	return nil
}

// Update rewrites the expected agent stream of the recording res
// replayed, in st, with the agent's output in that replay, and returns
// how many agent frames it wrote. The editor frames, the agent's stderr
// and the LLM exchanges stay as they were: a replay with the same agent
// then finds the recording equal. st must be writable.
//
// The agent's lines are written as Result.Live has them but for the ids
// and paths that differ from run to run, put back to their recorded
// values (see driver.Result.Restorer), so that the recording's editor
// frames still fit them. They are placed as the replay's Timeline
// interleaved them with the editor frames: each line after the editor
// frames sent before it arrived and before the others. Between two
// editor frames the new lines take the places, and times, of the agent
// lines recorded there, in order; those in excess go after the last
// event before the next editor frame, an LLM exchange, say.
func Update(st *store.Store, res *Result) (int, error) {
	if err := res.Updatable(); err != nil {
		return 0, err
	}
	gaps, err := agentGaps(st, res.Name)
	if err != nil {
		return 0, err
	}
	if len(gaps) != res.editors+1 {
		return 0, fmt.Errorf("%w %q: it has %d editor frames, the replay played %d: it changed since", ErrNotUpdatable, res.Name, len(gaps)-1, res.editors)
	}
	// lines[g] are the live lines that go between editor frames g-1 and g.
	lines := make([][]int, len(gaps))
	gap := 0 // after the editor frames started so far
	next := 0
	for _, s := range res.Timeline {
		if s.Lane == lane.Editor {
			gap = max(gap, s.Index+1)
			continue
		}
		if s.Index != next {
			return 0, fmt.Errorf("%w %q: the replay's timeline has agent line %d where line %d was due", ErrNotUpdatable, res.Name, s.Index, next)
		}
		lines[gap] = append(lines[gap], s.Index)
		next++
	}
	if next != len(res.Live) {
		return 0, fmt.Errorf("%w %q: the replay's timeline has %d of its %d agent lines", ErrNotUpdatable, res.Name, next, len(res.Live))
	}
	placed := make([]store.Placed, 0, len(res.Live))
	for g, idx := range lines {
		slots := gaps[g].slots
		for k, i := range idx {
			at := gaps[g].end
			if k < len(slots) {
				at = slots[k]
			}
			placed = append(placed, store.Placed{After: at.after, Offset: at.offset, Data: res.restore(i, res.Live[i])})
		}
	}
	if err := st.ReplaceLane(res.Name, store.LaneAgent, placed); err != nil {
		return 0, err
	}
	return len(placed), nil
}

// A place is where an agent frame goes: after the event of Seq after, at
// offset.
type place struct {
	after  uint64
	offset time.Duration
}

// A gap is what a recording holds between two editor frames: the places
// of its agent lines, and its end, after the last event of another lane.
type gap struct {
	slots []place
	end   place
}

// agentGaps returns the gaps of the named recording: before its first
// editor frame, between each two, and after the last. An editor line in
// pieces ends at its last piece, as the driver sees it.
func agentGaps(st *store.Store, name string) ([]gap, error) {
	var gaps []gap
	var cur gap
	var last place   // the last event of another lane, and the latest offset
	inAgent := false // within an agent line in pieces
	err := st.Events(name, func(e store.Event) error {
		switch {
		case e.Lane == store.LaneAgent:
			if !inAgent {
				cur.slots = append(cur.slots, place{last.after, e.Offset})
			}
			inAgent = e.Flags&store.FlagContinued != 0
			last.offset = max(last.offset, e.Offset)
			return nil
		case e.Lane == store.LaneEditor && e.Flags&store.FlagContinued == 0:
			cur.end = last
			gaps = append(gaps, cur)
			cur = gap{}
		}
		last = place{e.Seq, max(last.offset, e.Offset)}
		return nil
	})
	if err != nil {
		return nil, err
	}
	cur.end = last
	return append(gaps, cur), nil
}
