package replay

import (
	"errors"
	"strconv"
	"strings"

	"github.com/acptap/acptap/replay/driver"
)

// showNumbers returns err, the editor side's error, with the frames its
// *driver.WaitErrors name numbered as `acptap show` numbers them: the
// driver names a frame by its index among the recording's editor and
// agent frames ("frame 8 (session/prompt id=3)"), show by its seq over
// every lane ("frame 9"), and a message the user reads names the frame
// as show, where they look it up, and --stdio-fault do. A WaitError
// keeps its Frame, the index; a copy of it gets the Subject so
// renumbered. Other errors are as they were.
func (rec *recording) showNumbers(err error) error {
	if err == nil {
		return nil
	}
	errs := unjoin(err)
	changed := false
	for i, e := range errs {
		w, ok := e.(*driver.WaitError)
		if !ok {
			continue
		}
		if subject, ok := rec.renumber(w.Frame, w.Subject); ok {
			c := *w
			c.Subject = subject
			errs[i], changed = &c, true
		}
	}
	switch {
	case !changed:
		return err
	case len(errs) == 1:
		return errs[0]
	}
	return errors.Join(errs...)
}

// renumber returns subject, which names frame index i as "frame I" at
// its start, naming it by its seq instead; false if subject does not
// name frame i so, or the recording has no frame i.
func (rec *recording) renumber(i int, subject string) (string, bool) {
	if i < 0 || i >= len(rec.seqs) {
		return "", false
	}
	rest, ok := strings.CutPrefix(subject, "frame "+strconv.Itoa(i))
	if !ok || rest != "" && !strings.HasPrefix(rest, " ") {
		return "", false
	}
	return "frame " + strconv.FormatUint(rec.seqs[i], 10) + rest, true
}
