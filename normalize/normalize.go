// Package normalize rewrites ACP frames and LLM requests so that two runs of an agent session compare equal unless the agent behaved differently.
package normalize

import (
	"bytes"
	"encoding/json"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/acptap/acptap/lane"
)

// Options configures a Normalizer. The zero Options applies the default
// rules, coalesces message chunks, compares per stream (see Order), and
// rewrites no paths.
type Options struct {
	// Cwd, Home and Tmp are the session's working directory, home
	// directory and temporary directory, as the run being normalized
	// saw them; several of each are allowed (such as /tmp/x and its
	// real path /private/tmp/x). Absolute paths under them become
	// <cwd>/..., <home>/... and <tmp>/..., also inside longer strings
	// and file:// URIs, and in the forms agents derive from a path:
	// percent-encoded (%2Ftmp%2Fx), JSON-escaped (\/tmp\/x) and, for
	// roots of two components or more, with "/" replaced by "-" or "_"
	// (-tmp-x, _tmp_x); the longest root wins.
	//
	// A replayed run needs the recorded run's roots as well as its
	// own: the LLM responses it gets are the recorded ones, so text the
	// model wrote names the recorded paths.
	Cwd, Home, Tmp []string

	// Rules are user rules, applied in order after the default rules.
	Rules []Rule

	// NoCoalesce keeps every message chunk apart in Stream.
	NoCoalesce bool

	// NoDefaults turns off the default rules; the roots above and the
	// user rules still apply.
	NoDefaults bool

	// OmitEditor leaves the editor's frames (lane.Editor) out of a
	// Transcript: they are read for what they say of the agent's (which
	// request a response answers, which session it belongs to, in which
	// order the editor numbered its requests) but are not values. A
	// replay's editor frames are its own doing, played from the
	// recording; what is compared is the agent's.
	OmitEditor bool

	// Order says how Stream and Transcript arrange the frames for
	// comparison: per stream within a turn (ByStream, the default) or in
	// their order (Strict).
	Order Order
}

// A frame is one line of an ACP stream (lane.Line): the editor's
// (lane.Editor) or the agent's (lane.Agent), without its newline.

// A Normalizer normalizes the frames of one ACP stream, or the requests of
// one run, replacing the values nobody controls with placeholders. Its
// default rules:
//
//   - JSON-RPC ids become <rpc:N> for the requests the editor sends and
//     <agentRpc:N> for those the agent sends; a response gets the
//     placeholder of its request.
//   - Ids minted at run time become <sessionId:N> (sessionId, session_id),
//     <toolCallId:N> (toolCallId, call_id, tool_use_id, ...),
//     <terminalId:N>, <messageId:N>, and <id:N> (requestId,
//     prompt_cache_key, conversation_id, response_id, item_id, user_id,
//     installation_id, ..., and a bare "id" in LLM requests only), by
//     the member's key. In any text, UUIDs become <uuid:N> and prefixed
//     random ids (ses_..., msg_..., call_..., resp_..., toolu_...,
//     chatcmpl-...) <id:N>. A value keeps the placeholder it got first
//     wherever it shows up again, so references stay linked.
//   - Points in time become <time>: RFC 3339 date-times in any text, and
//     epoch numbers and date strings in time-like members (created,
//     timestamp, *_at, *_at_ms, *At, *_time, ...). Durations become
//     <duration>: anything in duration-like members (duration,
//     duration_ms, elapsed*, latency*, took*, wall_time, Rust's
//     {"secs", "nanos"}), and durations after "took", "elapsed", "Wall
//     time:" and the like in text. Process ids (pid, process_id,
//     processId) become <pid>, token counts inside usage reports
//     <tokens>, system_fingerprint <fingerprint>, and obfuscation
//     <obfuscation>. None of these are numbered: whether two values
//     coincide is up to the clock.
//   - Absolute paths under the roots of Options become <cwd>/...,
//     <home>/... and <tmp>/..., in any text, also in derived forms such
//     as -tmp-x-ws and %2Ftmp%2Fx%2Fws (see Options.Cwd).
//   - A string that holds a JSON object, such as tool call arguments, is
//     normalized as JSON and becomes canonical.
//   - Object keys are normalized like text. Other values stay: message
//     text, titles, kinds, statuses, stop reasons, exit codes, and
//     numbers in members that are not about time.
//
// Request adds rules for LLM requests; see there. Then come the user rules
// of Options.
//
// Placeholders are numbered per kind in order of first appearance, objects
// visited in the order of their sorted keys, so that two runs that differ
// only in such values normalize alike. A placeholder is never rewritten,
// so normalizing twice equals normalizing once.
//
// A Normalizer is safe for concurrent use, but the numbering follows the
// order of the calls: normalize one stream from one goroutine.
type Normalizer struct {
	mu         sync.Mutex
	defaults   bool
	coalesce   bool
	omitEditor bool
	order      Order
	roots      []root
	rules      []Rule
	presence   []presence // the presence rules of rules

	links  map[string]string // value key ("s:..." or "n:...") to placeholder
	counts map[string]int    // placeholders handed out per kind
	rpc    [2]rpcIDs
	refs   *refs // records what link looks up, for Requests; nil if not
}

// New returns a Normalizer for one stream.
func New(opts Options) *Normalizer {
	return &Normalizer{
		defaults:   !opts.NoDefaults,
		coalesce:   !opts.NoCoalesce,
		omitEditor: opts.OmitEditor,
		order:      opts.Order,
		roots:      newRoots(opts),
		rules:      slices.Clone(opts.Rules),
		presence:   presenceRules(opts.Rules),
		links:      map[string]string{},
		counts:     map[string]int{},
	}
}

// Frame normalizes one frame written by side and returns it as canonical
// JSON (compact, keys sorted). A line that is not JSON becomes a JSON
// string, normalized like any other string, so that junk lines compare
// too. Frame never coalesces.
func (n *Normalizer) Frame(side lane.Lane, line []byte) json.RawMessage {
	n.mu.Lock()
	defer n.mu.Unlock()
	return encode(n.frame(side, parseLine(line)))
}

// Stream normalizes a sequence of frames, typically all the agent wrote,
// and returns it as a list of canonical JSON values arranged for
// comparison: Transcript(frames).Values(). Normalizing that list again
// gives the same list.
func (n *Normalizer) Stream(frames []lane.Line) []json.RawMessage {
	return n.Transcript(frames).Values()
}

// frame normalizes one decoded frame: the default rules, then the user
// rules.
func (n *Normalizer) frame(side lane.Lane, v any) any {
	return applyRules(n.rules, n.defaultFrame(side, v), nil)
}

// parseLine decodes a frame, or returns its text for a line that is not
// JSON.
func parseLine(line []byte) any {
	line = bytes.TrimRight(line, "\r\n")
	if v, ok := decode(line); ok {
		return v
	}
	return strings.ToValidUTF8(string(line), "\uFFFD")
}

// defaultFrame applies the default rules to a decoded frame, linking the
// id of a JSON-RPC request and the id of its response.
func (n *Normalizer) defaultFrame(side lane.Lane, v any) any {
	m, ok := v.(map[string]any)
	if !ok || !n.defaults {
		return n.value(v, fromACP, false)
	}
	ns, ok := rpcNamespace(side, m)
	if !ok {
		return n.value(m, fromACP, false)
	}
	id := m["id"]
	delete(m, "id")
	out := n.value(m, fromACP, false).(map[string]any)
	out["id"] = n.rpcID(ns, id)
	return out
}

// rpcNamespace returns the id namespace of a JSON-RPC request or response:
// 0 for the requests the editor sends, 1 for those the agent sends. The
// two sides number their requests independently, so both have an id 0.
func rpcNamespace(side lane.Lane, m map[string]any) (int, bool) {
	switch m["id"].(type) {
	case string, json.Number:
	default:
		return 0, false
	}
	from := side // the side that sent the request
	if method, isCall := m["method"]; isCall {
		if _, ok := method.(string); !ok {
			return 0, false
		}
	} else {
		_, isResult := m["result"]
		_, isError := m["error"]
		if !isResult && !isError {
			return 0, false
		}
		from = lane.Agent
		if side == lane.Agent {
			from = lane.Editor
		}
	}
	if from == lane.Editor {
		return 0, true
	}
	return 1, true
}

var rpcKinds = [2]string{"rpc", "agentRpc"}

// rpcID returns the placeholder of a JSON-RPC id in namespace ns.
func (n *Normalizer) rpcID(ns int, id any) any {
	if x, ok := id.(string); ok && isPlaceholder(x) {
		return x
	}
	return "<" + rpcKinds[ns] + ":" + strconv.Itoa(int(n.rpc[ns].number(id))) + ">"
}

// rpcIDs numbers the JSON-RPC ids of one namespace from 1, in order of
// first appearance. A session of a hundred thousand requests has as many
// ids: integers, the most common, are held by value, and the numbers
// rather than their placeholders.
type rpcIDs struct {
	ints map[int64]int32  // integer ids
	keys map[string]int32 // the others, by valueKey, or "n:" and the number
	n    int32
}

// number returns the number of id, a string or a json.Number.
func (r *rpcIDs) number(id any) int32 {
	var key string
	switch x := id.(type) {
	case string:
		key = valueKey(x)
	case json.Number:
		if v, ok := intID(id); ok {
			return numberIn(&r.ints, v, &r.n)
		}
		key = "n:" + string(x)
	}
	return numberIn(&r.keys, key, &r.n)
}

// numberIn returns the number of k in *m, the next after *n, counted, if
// k is new.
func numberIn[K comparable](m *map[K]int32, k K, n *int32) int32 {
	if x, ok := (*m)[k]; ok {
		return x
	}
	if *m == nil {
		*m = make(map[K]int32)
	}
	*n++
	(*m)[k] = *n
	return *n
}

// clone returns a copy of r that numbers on from where r stands.
func (r *rpcIDs) clone() rpcIDs {
	return rpcIDs{ints: maps.Clone(r.ints), keys: maps.Clone(r.keys), n: r.n}
}

// A chunk is a run of message chunks being coalesced. The side is not part
// of what must be alike: only agents send session/update, and the output
// of Stream, which has no sides, must coalesce alike when normalized again.
type chunk struct {
	rest map[string]any  // the normalized frame without its text
	key  string          // rest as JSON: chunks with equal keys join
	text strings.Builder // the texts joined, not yet normalized
	// pieces are the chunks joined to this one before join, if any:
	// their place in the turn and where their text starts in text.
	pieces []piece
}

// A piece is a chunk joined to another.
type piece struct {
	at    int // the frame's index in its turn
	start int
}

var chunkKinds = map[string]bool{"agent_message_chunk": true, "agent_thought_chunk": true, "user_message_chunk": true}

// startChunk reports whether v, a decoded frame, is a message chunk with
// text content and returns it with everything but its text normalized.
// The text is normalized once the run of chunks is complete, so that a
// path or an id cut in two by a chunk boundary is still recognized.
func (n *Normalizer) startChunk(side lane.Lane, v any) (*chunk, bool) {
	m, ok := v.(map[string]any)
	if !ok || m["method"] != "session/update" {
		return nil, false
	}
	if _, ok := m["id"]; ok {
		return nil, false
	}
	update, _ := dig(m, "params", "update")
	content, ok := dig(update, "content")
	if !ok || content["type"] != "text" {
		return nil, false
	}
	if kind, _ := update["sessionUpdate"].(string); !chunkKinds[kind] {
		return nil, false
	}
	text, ok := content["text"].(string)
	if !ok {
		return nil, false
	}
	delete(content, "text")
	rest, _ := applyRules(n.rules, n.defaultFrame(side, m), nil).(map[string]any)
	// A user rule may have replaced the content or put a text back:
	// such a frame is normalized whole instead.
	if c, ok := dig(rest, "params", "update", "content"); !ok || c["text"] != nil {
		content["text"] = text
		return nil, false
	}
	c := &chunk{rest: rest, key: string(encode(rest))}
	c.text.WriteString(text)
	return c, true
}

var textPath = []step{{key: "params"}, {key: "update"}, {key: "content"}, {key: "text"}}

// finishChunk normalizes the joined text of a run of chunks and returns
// the coalesced frame.
func (n *Normalizer) finishChunk(c *chunk) any {
	content, _ := dig(c.rest, "params", "update", "content")
	text := n.str(c.text.String(), fromACP)
	content["text"] = applyRules(n.rules, text, textPath)
	return c.rest
}

// dig returns the object at the end of a chain of keys.
func dig(m map[string]any, keys ...string) (map[string]any, bool) {
	for _, k := range keys {
		next, ok := m[k].(map[string]any)
		if !ok {
			return nil, false
		}
		m = next
	}
	return m, true
}

func sortedKeys[V any](m map[string]V) []string {
	return slices.Sorted(maps.Keys(m))
}
