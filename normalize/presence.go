package normalize

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/acptap/acptap/internal/acp"
)

// A presence is what a presence rule ({"optional": ...}) says: which of
// the agent's frames may be there in one run and not in another, and
// where.
type presence struct {
	what  string // the frames' kind, as FrameKind says it
	at    string // "last", or ""
	after string // the kind of the frame before, or ""
}

// PresenceLast is the only position a presence rule's "at" takes: the
// frame ends its stream in its turn.
const PresenceLast = "last"

// FrameKind says what kind of ACP message v is, as presence rules name
// frames: "request METHOD" for a request, "notification METHOD" for a
// notification other than session/update, "update KIND" for a
// session/update, "update KIND STATUS" for a tool_call or tool_call_update
// with a status, "response" for a response or an error, "" for anything
// else. v is a decoded frame, or its JSON as []byte or json.RawMessage.
func FrameKind(v any) string {
	if b, ok := v.([]byte); ok {
		v = json.RawMessage(b)
	}
	if raw, ok := v.(json.RawMessage); ok {
		d, ok := decode(raw)
		if !ok {
			return ""
		}
		v = d
	}
	m, ok := v.(map[string]any)
	if !ok {
		return ""
	}
	method, isCall := m["method"].(string)
	id, hasID := m["id"]
	hasID = hasID && id != nil
	switch {
	case isCall && hasID:
		return "request " + method
	case isCall && method != "session/update":
		return "notification " + method
	case isCall:
		params, _ := m["params"].(map[string]any)
		update, _ := params["update"].(map[string]any)
		kind, _ := update["sessionUpdate"].(string)
		if kind == "" {
			return ""
		}
		status, _ := update["status"].(string)
		if (kind == "tool_call" || kind == "tool_call_update") && status != "" {
			return "update " + kind + " " + status
		}
		return "update " + kind
	}
	_, isResult := m["result"]
	_, isError := m["error"]
	if isResult || isError {
		return "response"
	}
	return ""
}

// kindMatches reports whether a frame of kind k is of the kind pattern p
// names: the same, or p without the status k has ("update
// tool_call_update" names every status).
func kindMatches(p, k string) bool {
	return k == p || strings.HasPrefix(k, p+" ") && strings.HasPrefix(p, "update ")
}

// parseFrameKind checks a frame kind of a presence rule.
func parseFrameKind(s string) error {
	word, rest, _ := strings.Cut(s, " ")
	fields := strings.Fields(rest)
	if strings.Join(fields, " ") != rest {
		return fmt.Errorf("%q: want single spaces between the words", s)
	}
	switch word {
	case "request", "notification":
		if len(fields) != 1 {
			return fmt.Errorf("%q: want %s METHOD", s, word)
		}
		if word == "notification" && fields[0] == "session/update" {
			return fmt.Errorf("%q: a session/update is named update KIND", s)
		}
		return nil
	case "update":
		if len(fields) != 1 && len(fields) != 2 {
			return fmt.Errorf("%q: want update KIND or update KIND STATUS", s)
		}
		if acp.StateUpdate(fields[0]) {
			return fmt.Errorf("%q: a state notification counts by its value at a turn's end, never by its presence", s)
		}
		if len(fields) == 2 && fields[0] != "tool_call" && fields[0] != "tool_call_update" {
			return fmt.Errorf("%q: only a tool_call or tool_call_update has a status", s)
		}
		return nil
	}
	return fmt.Errorf("%q: want request METHOD, notification METHOD, update KIND or update KIND STATUS", s)
}

// parsePresence checks the fields of a presence rule.
func parsePresence(rj ruleJSON) (presence, string, error) {
	switch {
	case rj.Path != nil:
		return presence{}, "path", errors.New("belongs to a value rule; a presence rule names frames by their kind")
	case rj.Regexp != nil:
		return presence{}, "regexp", errors.New("belongs to a value rule; a presence rule names frames by their kind")
	case rj.Placeholder != nil:
		return presence{}, "placeholder", errors.New("belongs to a path rule")
	case rj.Replace != nil:
		return presence{}, "replace", errors.New("belongs to a regexp rule")
	}
	p := presence{what: *rj.Optional}
	if err := parseFrameKind(p.what); err != nil {
		return presence{}, "optional", err
	}
	if rj.At != nil {
		p.at = *rj.At
		if p.at != PresenceLast {
			return presence{}, "at", fmt.Errorf("%q: want %q", p.at, PresenceLast)
		}
		if !strings.HasPrefix(p.what, "update ") {
			return presence{}, "at", errors.New(`"last" is for updates, which have streams of their own`)
		}
	}
	if rj.After != nil {
		p.after = *rj.After
		if err := parseFrameKind(p.after); err != nil {
			return presence{}, "after", err
		}
		if p.at != "" {
			return presence{}, "after", errors.New(`a presence rule takes "at" or "after", not both`)
		}
		if !strings.HasPrefix(p.what, "request ") {
			return presence{}, "after", errors.New(`"after" is for requests`)
		}
		if kindMatches(p.what, p.after) {
			return presence{}, "after", errors.New("names the optional frames themselves")
		}
	}
	if strings.HasPrefix(p.what, "update ") && p.at == "" {
		return presence{}, "at", errors.New(`missing: an optional update is "last" in its stream; the stream's first value is never optional`)
	}
	return p, "", nil
}

// Optional returns what a presence rule says: the kind of the frames that
// may be missing (see FrameKind), and where: at "last", or after a frame
// of kind after. It returns "" for a value rule.
func (r Rule) Optional() (what, at, after string) {
	if r.presence == nil {
		return "", "", ""
	}
	return r.presence.what, r.presence.at, r.presence.after
}

// OptionalRequest reports whether rules have a presence rule for the
// agent's requests of method.
func OptionalRequest(rules []Rule, method string) bool {
	for _, r := range rules {
		if r.presence != nil && r.presence.what == "request "+method {
			return true
		}
	}
	return false
}

// presenceRules returns the presence rules of rules.
func presenceRules(rules []Rule) []presence {
	var out []presence
	for _, r := range rules {
		if r.presence != nil {
			out = append(out, *r.presence)
		}
	}
	return out
}

// present returns the frames of one turn of one session that the presence
// rules keep, in order. A frame whose kind a rule names is left out (only
// the agent writes such frames; the editor's are not in a replay's
// transcripts):
//
//   - with "at": "last", when it is not the first of its stream in the
//     turn and every frame of its stream after it is of that kind too;
//   - with "after": KIND, when the frame before it, state
//     notifications and frames of its own kind passed over, is of KIND;
//   - with neither, wherever it is.
//
// What a rule leaves out depends only on the frames it does not, so that
// the frames it keeps, arranged again, keep the same frames.
func (n *Normalizer) present(seg *turnFrames) []placed {
	if len(n.presence) == 0 {
		return seg.frames
	}
	frames := seg.frames
	drop := make([]bool, len(frames))
	for _, p := range n.presence {
		// The frames of each stream from which on all are of the kind.
		var tail map[string]int
		if p.at == PresenceLast {
			tail = map[string]int{}
			seen := map[string]bool{}
			for i := len(frames) - 1; i >= 0; i-- {
				stream := seg.stream(i)
				if stream == "" {
					continue
				}
				if !seen[stream] && kindMatches(p.what, seg.class(i).what) {
					tail[stream] = i
					continue
				}
				seen[stream] = true
			}
		}
		first := map[string]int{}
		var kinds kindIndex
		if p.after != "" {
			kinds = newKindIndex(seg)
		}
		for i := range frames {
			c, stream := seg.class(i), seg.stream(i)
			if stream != "" {
				if _, ok := first[stream]; !ok {
					first[stream] = i
				}
			}
			if !kindMatches(p.what, c.what) {
				continue
			}
			switch {
			case p.at == PresenceLast:
				t, ok := tail[stream]
				drop[i] = drop[i] || ok && i >= t && first[stream] < i
			case p.after != "":
				drop[i] = drop[i] || kindMatches(p.after, before(seg, kinds, i, p.what))
			default:
				drop[i] = true
			}
		}
	}
	out := make([]placed, 0, len(frames))
	for i, f := range frames {
		if !drop[i] {
			out = append(out, f)
		}
	}
	return out
}

// before returns the kind of the agent's frame before frame i of a turn,
// state notifications and frames of kind skip passed over; "" for none.
// x is the turn's kindIndex.
func before(seg *turnFrames, x kindIndex, i int, skip string) string {
	for j := x.solid[i]; j >= 0; j = x.other[j] {
		if c := seg.class(int(j)); skip == "" || !kindMatches(skip, c.what) {
			return c.what
		}
	}
	return ""
}

// A kindIndex lets before pass over a run of frames of one kind in a step
// rather than frame by frame, so that a turn of many frames of one kind
// (a hundred thousand responses, say) is read in linear time: of each
// frame of a turn, solid is the nearest earlier frame that is not a state
// notification, and other, of those that are not, the nearest earlier
// such frame of another kind; -1 for none.
type kindIndex struct {
	solid, other []int32
}

func newKindIndex(seg *turnFrames) kindIndex {
	x := kindIndex{solid: make([]int32, len(seg.frames)), other: make([]int32, len(seg.frames))}
	last := int32(-1)
	for i := range seg.frames {
		x.solid[i] = last
		x.other[i] = -1
		c := seg.class(i)
		if c.state != "" {
			continue
		}
		// other[k] is of another kind than k, so this takes a step at
		// most.
		k := last
		for k >= 0 && seg.class(int(k)).what == c.what {
			k = x.other[k]
		}
		x.other[i] = k
		last = int32(i)
	}
	return x
}
