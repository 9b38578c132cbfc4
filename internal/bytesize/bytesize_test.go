package bytesize

import "testing"

func TestParse(t *testing.T) {
	for in, want := range map[string]int64{
		"1": 1, "1048576": 1 << 20, "64MiB": 64 << 20, "64M": 64 << 20, "64 mib": 64 << 20,
		"512k": 512 << 10, "1.5GiB": 3 << 29, "1GB": 1e9, "2kb": 2000, "10B": 10,
	} {
		if got, err := Parse(in); err != nil || got != want {
			t.Errorf("Parse(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "0", "-1", "MiB", "1XB", "1e3", "0.1", "1..2M", "99999999999GiB"} {
		if got, err := Parse(in); err == nil {
			t.Errorf("Parse(%q) = %d, want an error", in, got)
		}
	}
}

func TestFormat(t *testing.T) {
	for n, want := range map[int64]string{0: "0 B", 1023: "1023 B", 1024: "1.0 KiB", 1536: "1.5 KiB", 64 << 20: "64.0 MiB", 1023 << 20: "1023.0 MiB", 1 << 30: "1.0 GiB", 3 << 29: "1.5 GiB"} {
		if got := Format(n); got != want {
			t.Errorf("Format(%d) = %q, want %q", n, got, want)
		}
	}
}

// FuzzParse: any input is read or refused without a panic, and what is
// read is positive.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"64MiB", "1.5 GB", "0", "", "1e3", "9999999999999999999999G"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := Parse(s)
		if err == nil && n < 1 {
			t.Fatalf("Parse(%q) = %d, want at least 1", s, n)
		}
	})
}
