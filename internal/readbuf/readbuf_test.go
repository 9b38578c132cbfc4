package readbuf

import (
	"bytes"
	"errors"
	"io"
	"testing"
	"testing/iotest"
)

func TestFillKeepsUnreadBytes(t *testing.T) {
	src := bytes.Repeat([]byte("0123456789"), 3000)
	r := iotest.HalfReader(bytes.NewReader(src))
	var b Buffer
	var got []byte
	for {
		_, n, err := b.Fill(r)
		if n > 0 && b.End-b.Start > 7 {
			// Consume all but the last 7 bytes, so moves happen.
			got = append(got, b.Bytes[b.Start:b.End-7]...)
			b.Start = b.End - 7
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("Fill: %v", err)
		}
	}
	got = append(got, b.Unread()...)
	if !bytes.Equal(got, src) {
		t.Fatalf("got %d bytes, want the %d written, in order", len(got), len(src))
	}
}

func TestFillReportsMove(t *testing.T) {
	b := Buffer{Bytes: make([]byte, MinRead), Start: MinRead - 3, End: MinRead}
	copy(b.Bytes[b.Start:], "abc")
	moved, n, err := b.Fill(bytes.NewReader([]byte("de")))
	if moved != MinRead-3 || n != 2 || err != nil {
		t.Fatalf("Fill = %d, %d, %v; want %d, 2, nil", moved, n, err, MinRead-3)
	}
	if got := string(b.Unread()); got != "abcde" {
		t.Fatalf("Unread = %q, want %q", got, "abcde")
	}
}

type emptyReader struct{}

func (emptyReader) Read([]byte) (int, error) { return 0, nil }

func TestFillGivesUpOnEmptyReads(t *testing.T) {
	var b Buffer
	if _, _, err := b.Fill(emptyReader{}); !errors.Is(err, io.ErrNoProgress) {
		t.Fatalf("err = %v, want io.ErrNoProgress", err)
	}
}
