package calibrate

import "errors"

var (
	// ErrRuns: Options.Runs is negative.
	ErrRuns = errors.New("bad number of runs")
	// ErrNotCalibrated: Save was given a Result whose runs differ in
	// more than values.
	ErrNotCalibrated = errors.New("not calibrated: the runs differ in more than values")
)
