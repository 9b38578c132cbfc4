package replay

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/acptap/acptap/internal/acp"
	"github.com/acptap/acptap/lane"
	"github.com/acptap/acptap/replay/driver"
)

// A FrameRef names a recorded editor frame, for a StdioFault. The zero
// value names none.
type FrameRef struct {
	// Seq is the frame's number as `acptap show` numbers it (its first
	// column, the seq of show --json). If 0, Method and N name the frame.
	Seq uint64
	// Method and N name the N-th (from 1) editor frame of method Method,
	// a request or a notification of the editor's: session/prompt#2.
	Method string
	N      int
}

// String returns the frame as ParseStdioFault reads it: "12" or
// "session/prompt#2".
func (f FrameRef) String() string {
	if f.Seq > 0 {
		return strconv.FormatUint(f.Seq, 10)
	}
	return f.Method + "#" + strconv.Itoa(f.N)
}

// A StdioFault breaks one recorded editor frame on its way to the agent
// (see driver.Fault for what each kind does): `acptap replay
// --stdio-fault FRAME=ACTION`.
type StdioFault struct {
	Frame FrameRef
	driver.Fault
}

// String returns the fault's spec, which ParseStdioFault reads back.
func (f StdioFault) String() string { return f.Frame.String() + "=" + f.Fault.String() }

// ParseStdioFault parses FRAME=ACTION: FRAME a frame number as `acptap
// show` numbers them or METHOD#N, ACTION as driver.ParseFault reads it.
// A malformed FRAME fails with ErrStdioFault, a malformed ACTION with
// driver.ErrInvalidFault. Whether the recording has the frame is Run's to
// check.
func ParseStdioFault(spec string) (StdioFault, error) {
	frame, action, ok := strings.Cut(spec, "=")
	if !ok {
		return StdioFault{}, fmt.Errorf("%w: %q is not FRAME=ACTION", ErrStdioFault, spec)
	}
	ref, ok := parseFrameRef(frame)
	if !ok {
		return StdioFault{}, fmt.Errorf("%w: FRAME %q is neither a frame number from acptap show nor METHOD#N (N from 1), as in session/prompt#2", ErrStdioFault, frame)
	}
	f, err := driver.ParseFault(action)
	if err != nil {
		return StdioFault{}, err
	}
	return StdioFault{Frame: ref, Fault: f}, nil
}

// parseFrameRef reads a FRAME: a number from 1, or METHOD#N.
func parseFrameRef(s string) (FrameRef, bool) {
	if seq, err := strconv.ParseUint(s, 10, 64); err == nil {
		return FrameRef{Seq: seq}, seq > 0
	}
	i := strings.LastIndexByte(s, '#')
	if i <= 0 {
		return FrameRef{}, false
	}
	n, err := strconv.Atoi(s[i+1:])
	if err != nil || n < 1 {
		return FrameRef{}, false
	}
	return FrameRef{Method: s[:i], N: n}, true
}

// A StdioFaultOutcome is a fault of Options.StdioFaults, the frame it
// names, and whether the replay applied it.
type StdioFaultOutcome struct {
	StdioFault
	// Seq is the frame's number as `acptap show` numbers it.
	Seq uint64
	// What the frame is: "session/prompt id=3", "session/cancel",
	// "response id=0" (an answer to an agent request).
	What string
	// Applied says that the replay wrote, or dropped, the frame with its
	// fault; a fault of a frame the replay never came to (it ended
	// before: a wait timed out, the agent's stdin was closed, the agent
	// never sent the request a recorded answer answers) was not applied.
	Applied bool

	frame int // the frame's index among the recording's frames
}

// String says what the fault did in one line, as the reports print it:
// "stdio fault session/prompt#1=dup (frame 5, session/prompt id=2):
// applied".
func (o StdioFaultOutcome) String() string {
	frame := o.What
	if o.Frame.Seq == 0 {
		frame = fmt.Sprintf("frame %d, %s", o.Seq, o.What)
	}
	outcome := "applied"
	if !o.Applied {
		outcome = "not applied: the replay ended before it came to the frame"
	}
	return fmt.Sprintf("stdio fault %s (%s): %s", o.StdioFault, frame, outcome)
}

// stdioFaults finds the frames that faults name among rec's editor
// frames. It returns the driver's faults, by frame index, and the
// outcomes to report, in the order of faults, none applied yet. It fails
// with ErrStdioFault when a fault names no editor frame, splits its frame
// after its end, or names the frame another fault does.
func (rec *recording) stdioFaults(faults []StdioFault) (map[int]driver.Fault, []StdioFaultOutcome, error) {
	if len(faults) == 0 {
		return nil, nil, nil
	}
	var editors []int // the editor frames' indices, in order
	for i, l := range rec.frames.lanes {
		if l == lane.Editor {
			editors = append(editors, i)
		}
	}
	byFrame := make(map[int]driver.Fault, len(faults))
	var outcomes []StdioFaultOutcome
	for _, f := range faults {
		k, err := rec.findEditorFrame(f, editors)
		if err != nil {
			return nil, nil, err
		}
		i := editors[k]
		line, err := rec.frames.Line(i)
		if err != nil {
			return nil, nil, err
		}
		if f.Kind == driver.FaultSplit && f.Bytes > len(line.Data) {
			return nil, nil, fmt.Errorf("%w %s: frame %d is %d bytes long; split it at fewer bytes", ErrStdioFault, f, rec.editorSeqs[k], len(line.Data))
		}
		if j := slices.IndexFunc(outcomes, func(o StdioFaultOutcome) bool { return o.frame == i }); j >= 0 {
			return nil, nil, fmt.Errorf("%w %s: frame %d has a fault already, %s; give one fault per frame", ErrStdioFault, f, rec.editorSeqs[k], outcomes[j].StdioFault)
		}
		byFrame[i] = f.Fault
		outcomes = append(outcomes, StdioFaultOutcome{StdioFault: f, Seq: rec.editorSeqs[k], What: acp.Describe(line.Data), frame: i})
	}
	return byFrame, outcomes, nil
}

// findEditorFrame returns the ordinal among rec's editor frames (whose
// indices are editors) of the frame f names.
func (rec *recording) findEditorFrame(f StdioFault, editors []int) (int, error) {
	if f.Frame.Seq > 0 {
		k, found := slices.BinarySearch(rec.editorSeqs, f.Frame.Seq)
		if !found {
			return 0, fmt.Errorf("%w %s: the recording has no editor frame %d; name one of its editor frames, %s, as acptap show numbers them, or METHOD#N", ErrStdioFault, f, f.Frame.Seq, listSeqs(rec.editorSeqs))
		}
		return k, nil
	}
	n := 0
	var methods []string
	for k, i := range editors {
		line, err := rec.frames.Line(i)
		if err != nil {
			return 0, err
		}
		m := acp.Parse(line.Data)
		if m.Kind != acp.Request && m.Kind != acp.Notification {
			continue
		}
		if m.Method == f.Frame.Method {
			if n++; n == f.Frame.N {
				return k, nil
			}
		} else if !slices.Contains(methods, m.Method) {
			methods = append(methods, m.Method)
		}
	}
	if n > 0 {
		return 0, fmt.Errorf("%w %s: the recording has %d editor %s of method %s, not %d; name one from %s#1 to %s#%d", ErrStdioFault, f, n, plural(n, "frame"), f.Frame.Method, f.Frame.N, f.Frame.Method, f.Frame.Method, n)
	}
	if len(methods) == 0 {
		return 0, fmt.Errorf("%w %s: the recording has no editor request or notification; name a frame by its number in acptap show", ErrStdioFault, f)
	}
	return 0, fmt.Errorf("%w %s: the recording has no editor frame of method %s; name one of its editor's methods, %s, or a frame number from acptap show", ErrStdioFault, f, f.Frame.Method, strings.Join(methods, ", "))
}

// listSeqs lists frame numbers for a message, the first few of many.
func listSeqs(seqs []uint64) string {
	const most = 8
	if len(seqs) == 0 {
		return "none"
	}
	var parts []string
	for _, s := range seqs[:min(len(seqs), most)] {
		parts = append(parts, strconv.FormatUint(s, 10))
	}
	if len(seqs) > most {
		return strings.Join(parts, ", ") + fmt.Sprintf(" and %d more", len(seqs)-most)
	}
	return strings.Join(parts, ", ")
}
