package acp

import (
	"bytes"
	"encoding/json"
)

// OpensSession reports whether m is a request that opens a session:
// session/new, session/load or session/resume.
func OpensSession(m Message) bool {
	return m.Kind == Request && (m.Method == "session/new" || m.Method == "session/load" || m.Method == "session/resume")
}

// MayOpenSession reports whether line may be a request that opens a
// session, cheaply: a line for which it is false is not one.
func MayOpenSession(line []byte) bool { return bytes.Contains(line, []byte(`"session/`)) }

// Sessions tells which session each frame of one connection belongs to,
// its frames read in order: a request or notification belongs to the
// session its params name (sessionId); a response to its request's, and
// the answer to session/new to the session it made. Sessions are numbered
// from 1 in the order they are first named. The zero value is ready to
// use.
type Sessions struct {
	// open are the requests not yet answered, by IDKey: [0] those the
	// editor sent, [1] the agent's.
	open    [2]map[string]openRequest
	numbers map[string]int
	// prompts are the session/prompt requests not yet answered, by
	// session id.
	prompts map[string]int
}

// openRequest is a request not yet answered.
type openRequest struct{ session, method string }

// Of reads m, a frame the editor (fromEditor) or the agent wrote, and
// returns the id of its session and the session's number; "" and 0 for a
// frame of no session.
func (s *Sessions) Of(fromEditor bool, m Message) (id string, number int) {
	if s.numbers == nil {
		s.open = [2]map[string]openRequest{{}, {}}
		s.numbers = map[string]int{}
		s.prompts = map[string]int{}
	}
	sender := 1
	if fromEditor {
		sender = 0
	}
	switch m.Kind {
	case Request, Notification:
		var p struct {
			SessionID string `json:"sessionId"`
		}
		json.Unmarshal(m.Params, &p)
		id = p.SessionID
		if m.Kind == Request {
			s.open[sender][IDKey(m.ID)] = openRequest{session: id, method: m.Method}
			if m.Method == "session/prompt" && fromEditor && id != "" {
				s.prompts[id]++
			}
		}
	case Response, Error:
		k := IDKey(m.ID)
		r, ok := s.open[1-sender][k]
		delete(s.open[1-sender], k)
		id = r.session
		if d, ok := ParseResultDetails(m.Result); ok && id == "" && d.SessionID != "" {
			id = d.SessionID
		}
		if ok && r.method == "session/prompt" && s.prompts[id] > 0 {
			s.prompts[id]--
		}
	}
	if id == "" {
		return "", 0
	}
	n, ok := s.numbers[id]
	if !ok {
		n = len(s.numbers) + 1
		s.numbers[id] = n
	}
	return id, n
}

// Count returns how many sessions have been named so far.
func (s *Sessions) Count() int { return len(s.numbers) }

// Prompting returns the session whose session/prompt request is the one
// in flight, and its number, when exactly one session has one; "" and 0
// otherwise. An LLM call then belongs to that session's turn.
func (s *Sessions) Prompting() (id string, number int) {
	for sid, n := range s.prompts {
		if n == 0 {
			continue
		}
		if id != "" {
			return "", 0
		}
		id = sid
	}
	if id == "" {
		return "", 0
	}
	return id, s.numbers[id]
}
