package llmserver

import (
	"fmt"
	"hash/maphash"
	"strings"

	"github.com/acptap/acptap/internal/exchange"
)

// matchWindow is how many of a queue's exchanges not yet served a request
// is matched against (see Matching): as many conversations as may be in
// flight at once, and then some.
const matchWindow = 8

// An Ambiguity is a request that continued two recorded conversations
// alike (see Matching): it shared the same longest beginning with the
// recorded requests of Numbers, which go on otherwise, and got the first.
type Ambiguity struct {
	Queue   string // the request's queue key
	Numbers []int  // the exchanges it could not tell apart, in recorded order
	// Shared is how many parts of the conversation (the system prompt
	// and the messages) it shared with each.
	Shared int
}

// String describes a in one line.
func (a Ambiguity) String() string {
	names := make([]string, len(a.Numbers))
	for i, n := range a.Numbers {
		names[i] = fmt.Sprintf("llm #%d", n)
	}
	return fmt.Sprintf("a request of %s continues the conversations of %s alike (%d messages shared with each, then they differ); it was answered with llm #%d, the first",
		a.Queue, strings.Join(names, " and "), a.Shared, a.Numbers[0])
}

// match returns the exchange of queue key that live continues the
// conversation of (see Matching), or nil for the first one not served.
func (s *Server) match(key string, live *exchange.Exchange) *entry {
	s.mu.Lock()
	var candidates []*entry
	if q := s.queues[key]; q != nil {
		for _, e := range q.entries[q.next:] {
			if !e.served {
				candidates = append(candidates, e)
			}
			if len(candidates) == matchWindow {
				break
			}
		}
	}
	s.mu.Unlock()
	if len(candidates) < 2 {
		return nil
	}
	conv := s.hashes(s.converse(live))
	var best []*entry // those sharing the most
	bestShared := 0
	for _, c := range candidates {
		rec, ok := s.conversationOf(c)
		if !ok {
			return nil // the load error is reported when it is served
		}
		shared := commonPrefix(conv, rec)
		if shared == len(conv) && shared == len(rec) {
			return c // the same conversation: the first such
		}
		switch {
		case shared > bestShared:
			best, bestShared = []*entry{c}, shared
		case shared == bestShared && shared > 0:
			best = append(best, c)
		}
	}
	if len(best) == 0 {
		return nil
	}
	if len(best) > 1 {
		a := Ambiguity{Queue: key, Shared: bestShared}
		for _, e := range best {
			a.Numbers = append(a.Numbers, e.Number)
		}
		s.mu.Lock()
		s.ambiguous = append(s.ambiguous, a)
		s.mu.Unlock()
	}
	return best[0]
}

// conversationOf returns the conversation of e's recorded request,
// hashed, loading the exchange the first time; false if it cannot be
// loaded.
func (s *Server) conversationOf(e *entry) ([]uint64, bool) {
	s.mu.Lock()
	if e.conversed {
		c := e.conversation
		s.mu.Unlock()
		return c, true
	}
	s.mu.Unlock()
	x, err := s.exchanges.Load(e.Number)
	if err != nil || x == nil {
		return nil, false
	}
	c := s.hashes(s.converse(x))
	s.mu.Lock()
	e.conversation, e.conversed = c, true
	s.mu.Unlock()
	return c, true
}

// hashes hashes each part of a conversation: what matching compares,
// without holding a recorded conversation's text.
func (s *Server) hashes(parts []string) []uint64 {
	out := make([]uint64, len(parts))
	for i, p := range parts {
		out[i] = maphash.String(s.seed, p)
	}
	return out
}

// commonPrefix returns how many parts a and b share from their start.
func commonPrefix(a, b []uint64) int {
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	return n
}
