package calibrate

import "errors"

var (
	// ErrRuns: Options.Runs is negative.
	ErrRuns = errors.New("bad number of runs")
	// ErrFaults: Options.Replay injects faults (Faults, MCPFaults or
	// StdioFaults): a calibration learns the noise of the agent as it
	// runs, unbroken.
	ErrFaults = errors.New("faults in a calibration's replays")
	// ErrNotCalibrated: Save was given a Result whose runs differ in
	// more than values.
	ErrNotCalibrated = errors.New("not calibrated: the runs differ in more than values")
)
