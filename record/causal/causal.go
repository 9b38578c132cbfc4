// Package causal checks a recording's order against what caused what: no agent sends an LLM a prompt it has not read, nor says what an LLM has not yet told it.
//
// acptap record numbers a recording's events in the order they happened
// (internal/stamp). The checks here test that from the outside, by
// causality that no scheduling can reverse, on a recording of any agent:
// they are what the tests of record's order, with the bundled agents and
// real ones, assert.
package causal

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/acptap/acptap/internal/exchange"
	"github.com/acptap/acptap/store"
)

// An Event is a recorded line, whole, or an exchange.
type Event struct {
	Seq    uint64 // a line's is the Seq of its last piece
	Offset time.Duration
	Lane   store.Lane
	Line   []byte             // a frame's line, its Continued pieces joined
	X      *exchange.Exchange // an exchange
}

// A Recording is a recording's events in Seq order.
type Recording struct {
	Name   string
	Events []Event
}

// A Violation is an event that comes before what caused it, or before an
// event it happened after.
type Violation struct {
	Seq   uint64 // the event out of place
	After uint64 // the event it should come after
	What  string
}

func (v Violation) String() string {
	return fmt.Sprintf("event %d comes before event %d: %s", v.Seq, v.After, v.What)
}

// Read reads recording name of st. Its Violations include, already, every
// gap in its Seqs and every event whose time is earlier than an event's
// before it.
func Read(st *store.Store, name string) (*Recording, []Violation, error) {
	r := &Recording{Name: name}
	var vs []Violation
	var last store.Event
	// A line in pieces is placed at its last piece, which is when it
	// had all arrived: what it causes comes after that.
	join := store.JoinLines(func(e store.Event) error {
		ev := Event{Seq: last.Seq, Offset: last.Offset, Lane: e.Lane}
		switch e.Kind {
		case store.KindFrame:
			ev.Line = e.Data
		case store.KindExchange:
			x, err := exchange.Unmarshal(e.Data)
			if err != nil {
				return fmt.Errorf("event %d: %w", e.Seq, err)
			}
			ev.X = x
		}
		r.Events = append(r.Events, ev)
		return nil
	})
	err := st.Events(name, func(e store.Event) error {
		if e.Seq != last.Seq+1 {
			vs = append(vs, Violation{Seq: e.Seq, After: last.Seq, What: fmt.Sprintf("Seqs %d to %d are missing", last.Seq+1, e.Seq-1)})
		}
		if e.Offset < last.Offset {
			vs = append(vs, Violation{Seq: e.Seq, After: last.Seq,
				What: fmt.Sprintf("its time %v is before the other's %v: time goes back along the Seqs", e.Offset, last.Offset)})
		}
		last = e
		return join(e)
	})
	if err != nil {
		return nil, nil, fmt.Errorf("reading recording %s: %w", name, err)
	}
	return r, vs, nil
}

// First returns the Seq of the first event match accepts, or 0.
func (r *Recording) First(match func(Event) bool) uint64 {
	for _, e := range r.Events {
		if match(e) {
			return e.Seq
		}
	}
	return 0
}

// Conversation checks an ACP conversation with an LLM: every LLM
// request that holds a prompt's text comes after the editor's
// session/prompt that sent it, and every agent message chunk whose text
// an LLM answer holds comes after the first exchange whose answer holds
// it. Text is looked for as it is spelled in JSON, and only where it is
// long enough to say where it came from. checked is how many such pairs
// there were.
func (r *Recording) Conversation() (checked int, vs []Violation) {
	type prompt struct {
		seq  uint64
		text []byte // as spelled in JSON
	}
	var prompts []prompt
	for _, e := range r.Events {
		if e.Lane != store.LaneEditor {
			continue
		}
		var m struct {
			Method string `json:"method"`
			Params struct {
				Prompt []struct {
					Type string `json:"type"`
					Text string `json:"text"`
				} `json:"prompt"`
			} `json:"params"`
		}
		if json.Unmarshal(e.Line, &m) != nil || m.Method != "session/prompt" {
			continue
		}
		for _, b := range m.Params.Prompt {
			if b.Type == "text" && len(b.Text) >= minText {
				prompts = append(prompts, prompt{e.Seq, jsonText(b.Text)})
			}
		}
	}
	for _, e := range r.Events {
		if e.X == nil {
			continue
		}
		for _, p := range prompts {
			if bytes.Contains(e.X.RequestBody, p.text) {
				checked++
				if e.Seq < p.seq {
					vs = append(vs, Violation{Seq: e.Seq, After: p.seq,
						What: fmt.Sprintf("LLM request %s %s holds the text %s of the session/prompt", e.X.Method, e.X.URL, p.text)})
				}
			}
		}
	}
	for _, e := range r.Events {
		text := messageChunk(e)
		if text == nil {
			continue
		}
		for _, x := range r.Events {
			if x.X != nil && bytes.Contains(x.X.Body(), text) {
				checked++
				if x.Seq > e.Seq {
					vs = append(vs, Violation{Seq: e.Seq, After: x.Seq,
						What: fmt.Sprintf("the agent says %s, which the answer to LLM request %s %s holds first", text, x.X.Method, x.X.URL)})
				}
				break
			}
		}
	}
	return checked, vs
}

// minText is the least length of a text that says where it came from.
const minText = 6

// messageChunk returns the text of an agent_message_chunk line, as
// spelled in JSON, or nil.
func messageChunk(e Event) []byte {
	if e.Lane != store.LaneAgent || !bytes.Contains(e.Line, []byte("agent_message_chunk")) {
		return nil
	}
	var m struct {
		Method string `json:"method"`
		Params struct {
			Update struct {
				Kind    string `json:"sessionUpdate"`
				Content struct {
					Text string `json:"text"`
				} `json:"content"`
			} `json:"update"`
		} `json:"params"`
	}
	if json.Unmarshal(e.Line, &m) != nil || m.Method != "session/update" || m.Params.Update.Kind != "agent_message_chunk" {
		return nil
	}
	text := strings.TrimSpace(m.Params.Update.Content.Text)
	if len(text) < minText {
		return nil
	}
	return jsonText(text)
}

// jsonText is s as a JSON string spells it, without the quotes.
func jsonText(s string) []byte {
	b, _ := json.Marshal(s)
	return b[1 : len(b)-1]
}
