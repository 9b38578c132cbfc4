package exchange

import (
	"fmt"
	"strings"
)

// End is how an exchange ended, as the tap saw it. It is recorded as a
// word ("complete", "client-gone", ...), which is part of the stored
// format; Exchange.Error adds a description for people.
type End uint8

const (
	// EndInFlight is an exchange that has not ended: its request is
	// recorded, its response not yet. A recording that stopped before the
	// tap had the exchange's end keeps it so.
	EndInFlight End = iota
	// EndComplete is an exchange whose response arrived whole; the agent
	// may have hung up right after the final event of a stream.
	EndComplete
	// EndUpstreamFailed is an exchange that got no response: the upstream
	// could not be reached, TLS failed, the connection closed before a
	// response header.
	EndUpstreamFailed
	// EndCut is an exchange whose response started and was then broken
	// off by the upstream.
	EndCut
	// EndClientGone is an exchange the agent walked away from, closing
	// its connection or cancelling its request, before the response
	// ended.
	EndClientGone
	// EndTapClosed is an exchange cut short by the tap closing, when the
	// recording stopped: the agent never saw it end.
	EndTapClosed
	// EndRefused is a request the tap answered itself with an error
	// status instead of forwarding it: its body could not be read, or it
	// asked for a protocol upgrade.
	EndRefused
)

// endWords are the recorded words of the ends, by End.
var endWords = [...]string{
	EndInFlight:       "in-flight",
	EndComplete:       "complete",
	EndUpstreamFailed: "upstream-failed",
	EndCut:            "cut",
	EndClientGone:     "client-gone",
	EndTapClosed:      "tap-closed",
	EndRefused:        "refused",
}

// String returns the word that records e, or end(N) for a value that is
// no End.
func (e End) String() string {
	if int(e) < len(endWords) {
		return endWords[e]
	}
	return fmt.Sprintf("end(%d)", uint8(e))
}

// MarshalText returns the word that records e.
func (e End) MarshalText() ([]byte, error) {
	if int(e) >= len(endWords) {
		return nil, fmt.Errorf("%w: %d", ErrUnknownEnd, uint8(e))
	}
	return []byte(endWords[e]), nil
}

// UnmarshalText reads a word written by MarshalText.
func (e *End) UnmarshalText(text []byte) error {
	for i, w := range endWords {
		if w == string(text) {
			*e = End(i)
			return nil
		}
	}
	return fmt.Errorf("%w %q", ErrUnknownEnd, text)
}

// The wording of the errors that format-2 recordings hold, from which
// legacyEnd reads their ends. It is frozen here, as those recordings have
// it; what the tap writes now is free to change.
const (
	legacyClientGone = "the client went away"
	legacyTapClosed  = "tap closed"
	legacyUnreadable = "reading the request body: "
	legacyUpgrade    = "protocol upgrades and tunnels within tunnels are not supported"
)

// legacyEnd returns the end of an exchange recorded before ends were
// typed, which only its error text and status tell.
func legacyEnd(status int, errText string) End {
	switch {
	case errText == "" && status == 0:
		// Only an exchange written in flight has neither: a failure
		// always said why, and a completed exchange had a response.
		return EndInFlight
	case errText == "":
		return EndComplete
	case strings.Contains(errText, legacyClientGone):
		return EndClientGone
	case strings.Contains(errText, legacyTapClosed):
		return EndTapClosed
	case status != 0:
		return EndCut
	case strings.HasPrefix(errText, legacyUnreadable), strings.HasPrefix(errText, legacyUpgrade):
		return EndRefused
	}
	return EndUpstreamFailed
}
