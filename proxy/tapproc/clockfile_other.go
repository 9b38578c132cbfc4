//go:build unix && !linux

package tapproc

import "os"

// clockFile returns an unlinked temporary file for a SharedClock.
func clockFile() (*os.File, error) {
	f, err := os.CreateTemp("", "acptap-clock-*")
	if err != nil {
		return nil, err
	}
	if err := os.Remove(f.Name()); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}
