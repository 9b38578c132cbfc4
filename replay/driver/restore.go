package driver

import (
	"encoding/json"
	"maps"

	"github.com/acptap/acptap/lane"
)

// A Step is one event of a Run's timeline.
//
// A line the agent wrote before Run started writing an editor frame
// cannot answer that frame: placed before the frame in a recording, it
// is output the frame may wait for. A line received after it may answer
// it, or may have been on its way already: placed after the frame, it is
// output the frame does not wait for. Either way a recording that
// interleaves its frames as the Timeline says can be played again.
type Step struct {
	// Lane is lane.Editor when Run started writing a recorded editor frame
	// (a step or an answer), lane.Agent when it received a line of the
	// agent.
	Lane lane.Lane
	// Index is the frame's index in Options.Recorded (lane.Editor) or the
	// line's in Result.Live (lane.Agent).
	Index int
}

// requestTwin notes the id of the recorded twin of the agent request
// just received, the last line received.
func (r *run) requestTwin(id json.RawMessage) {
	if id == nil {
		return
	}
	if r.res.reqIDs == nil {
		r.res.reqIDs = make(map[int]json.RawMessage)
	}
	r.res.reqIDs[r.res.Received-1] = id
}

// Restorer returns a function that turns line i of the agent's output in
// the Run (Live[i], or a later line when i is past Live) into what the
// recording would hold, so that it can stand next to the recorded editor
// frames in place of the recorded agent output (acptap replay --update):
//
//   - the ids Run learned are put back: each live id becomes the recorded
//     one (the inverse of the substitutions made in editor frames);
//   - paths are rewritten by paths, live prefix → recorded prefix, with
//     the rules of Options.PathMap;
//   - an agent request gets the id of its recorded twin, the request
//     whose recorded answer Run sent, so that the answer still pairs with
//     it.
//
// As in editor frames, the envelope's "jsonrpc", "id" and "method" keep
// their values (but for the request id above), and lines that are not
// JSON are returned as they are.
func (res *Result) Restorer(paths map[string]string) func(i int, line []byte) []byte {
	var inv substitutions
	if len(res.subs.live) > 0 {
		inv.live = make(map[string]string, len(res.subs.live))
		for rec, live := range res.subs.live {
			inv.live[live] = rec
		}
		inv.words = make(map[string]string, len(res.subs.words))
		for rec, live := range res.subs.words {
			inv.words[live] = rec
		}
	}
	pm := newPathMap(paths)
	ids := maps.Clone(res.reqIDs)
	return func(i int, line []byte) []byte {
		return rewriteMessage(line, func(s string) string {
			return pm.apply(inv.apply(s))
		}, ids[i])
	}
}
