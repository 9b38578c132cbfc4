package replay

import (
	"errors"
	"fmt"
	"testing"

	"github.com/acptap/acptap/replay/driver"
)

// TestShowNumbers: the driver's wait errors name their frame as acptap
// show numbers it, joined or alone; what names no frame by its index is
// left as it was, and the driver's error is not changed.
func TestShowNumbers(t *testing.T) {
	rec := &recording{seqs: []uint64{1, 3, 4, 6, 7, 9, 10, 11, 12}}
	wait := func(frame int, subject string) *driver.WaitError {
		return &driver.WaitError{Frame: frame, Subject: subject, Missing: []string{"the response to editor request id=2 (session/prompt)"}, Err: driver.ErrTimeout}
	}
	for _, tc := range []struct {
		frame       int
		subject     string
		wantSubject string
	}{
		{6, "frame 6 (session/prompt id=3)", "frame 10 (session/prompt id=3)"},
		{8, "frame 8 (answer to fs/read_text_file #1)", "frame 12 (answer to fs/read_text_file #1)"},
		{8, "frame 8", "frame 12"},
		{9, "the end of the recording", "the end of the recording"},
		{-1, "the error response to fs/write_text_file #2", "the error response to fs/write_text_file #2"},
		{6, "session/prompt id=3", "session/prompt id=3"},                        // a FaultClose's, by what it is
		{6, "frame 60 (session/prompt id=3)", "frame 60 (session/prompt id=3)"},  // not frame 6
		{20, "frame 20 (session/prompt id=3)", "frame 20 (session/prompt id=3)"}, // no such frame
	} {
		w := wait(tc.frame, tc.subject)
		got := rec.showNumbers(w)
		var gw *driver.WaitError
		if !errors.As(got, &gw) || gw.Subject != tc.wantSubject || gw.Frame != tc.frame || gw.Err != driver.ErrTimeout || len(gw.Missing) != 1 {
			t.Errorf("%q of frame %d: got %#v, want the subject %q", tc.subject, tc.frame, got, tc.wantSubject)
		}
		if w.Subject != tc.subject {
			t.Errorf("%q: the driver's error was changed to %q", tc.subject, w.Subject)
		}
	}

	missing := &driver.MissingError{Method: "session/request_permission", N: 1}
	wrapped := fmt.Errorf("writing frame 2 (session/new id=1) to the agent: %w", errors.New("broken pipe"))
	joined := rec.showNumbers(errors.Join(missing, wait(6, "frame 6 (session/prompt id=3)"), wrapped))
	errs := unjoin(joined)
	if len(errs) != 3 || errs[0] != missing || errs[2] != wrapped {
		t.Fatalf("joined errors: got %v", errs)
	}
	if want := "frame 10 (session/prompt id=3) waited 0s for: the response to editor request id=2 (session/prompt)"; errs[1].Error() != want {
		t.Errorf("the joined wait error says %q, want %q", errs[1], want)
	}
	if rec.showNumbers(nil) != nil {
		t.Errorf("no error became one")
	}
}
