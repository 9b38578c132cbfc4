// Package bytesize reads and writes sizes in bytes the way people type and read them.
package bytesize

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// units are the units Parse accepts; K, M and G are binary.
var units = map[string]float64{
	"": 1, "b": 1,
	"k": 1 << 10, "kib": 1 << 10, "kb": 1e3,
	"m": 1 << 20, "mib": 1 << 20, "mb": 1e6,
	"g": 1 << 30, "gib": 1 << 30, "gb": 1e9,
}

// Parse reads a positive size: "1048576", "64MiB", "512k", "1.5 GB".
func Parse(s string) (int64, error) {
	t := strings.TrimSpace(s)
	i := strings.IndexFunc(t, func(r rune) bool { return (r < '0' || r > '9') && r != '.' })
	num, unit := t, ""
	if i >= 0 {
		num, unit = t[:i], strings.ToLower(strings.TrimSpace(t[i:]))
	}
	f, err := strconv.ParseFloat(num, 64)
	mult, ok := units[unit]
	if err != nil || !ok || num == "" {
		return 0, fmt.Errorf("size %q: want bytes or a number with a unit, e.g. 64MiB, 512K or 1GB", s)
	}
	n := f * mult
	if n < 1 || n >= math.MaxInt64 {
		return 0, fmt.Errorf("size %q: want at least 1 byte", s)
	}
	return int64(n), nil
}

// Format writes n bytes for people: "512 B", "1.5 KiB", "64.0 MiB", "2.0 GiB".
func Format(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}
