package record

import (
	"context"
	"errors"
	"io"

	"github.com/acptap/acptap/store"
)

// A Driver plays the editor's side of a recording that acptap drives
// itself (a scenario, a re-recording): it writes the agent's stdin and
// closes it when it is done, and reads the agent's stdout, which ends
// once the agent has exited. Its error is the session's failure, not the
// recording's.
type Driver func(stdin io.WriteCloser, stdout io.Reader) error

// Driven is how a driven recording went.
type Driven struct {
	// Result is the recording's, nil if the agent never ran.
	Result *Result
	// DriverErr is what the Driver returned.
	DriverErr error
}

// RunDriven records opts into st with drive as the editor, in place of
// opts.Stdin and opts.Stdout; signals are not forwarded (the driver stops
// on its context, and the agent once its stdin closes). The error is
// Prepare's or Plan.Run's: nothing, or not all, was recorded. Once the
// driver returns, the agent's output is read to its end and dropped.
func RunDriven(ctx context.Context, st *store.Store, opts Options, drive Driver) (Driven, error) {
	editorIn, agentIn := io.Pipe()   // the driver writes, the recorder reads
	agentOut, editorOut := io.Pipe() // the recorder writes, the driver reads
	opts.Stdin, opts.Stdout = editorIn, editorOut
	opts.ForwardSignals = false
	plan, err := Prepare(opts)
	if err != nil {
		return Driven{}, err
	}
	var d Driven
	recorded := make(chan error, 1)
	go func() {
		// The recording ends when the agent does, not with ctx: what
		// it says as it stops is kept.
		res, err := plan.Run(context.WithoutCancel(ctx), st)
		d.Result = res
		// The driver's writes and reads end with the agent.
		editorIn.CloseWithError(errors.New("the agent is gone"))
		editorOut.Close()
		recorded <- err
	}()
	d.DriverErr = drive(agentIn, agentOut)
	agentIn.Close()
	io.Copy(io.Discard, agentOut)
	err = <-recorded
	return d, err
}
