//go:build unix && !linux

package tapproc

import "os"

// counterFile returns an unlinked temporary file for a Counter.
func counterFile() (*os.File, error) {
	f, err := os.CreateTemp("", "acptap-seq-*")
	if err != nil {
		return nil, err
	}
	if err := os.Remove(f.Name()); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}
