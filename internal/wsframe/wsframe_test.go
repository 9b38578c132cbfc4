package wsframe

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
)

// TestRoundTrip: frames of every length class, masked and not, read back
// as written, their bytes as read being what was written.
func TestRoundTrip(t *testing.T) {
	for _, n := range []int{0, 1, 125, 126, 127, 65535, 65536, 70000} {
		for _, masked := range []bool{false, true} {
			payload := bytes.Repeat([]byte("ab"), n)[:n]
			f := ServerFrame(Binary, payload)
			if masked {
				f = ClientFrame(Binary, payload)
			}
			f.RSV = 4
			wire := Append(nil, f)
			got, raw, err := Read(bufio.NewReader(bytes.NewReader(wire)), 1<<20)
			if err != nil {
				t.Fatalf("%d bytes, masked %v: %v", n, masked, err)
			}
			if !bytes.Equal(raw, wire) || !bytes.Equal(got.Payload, payload) || got.Masked != masked || !got.Fin || got.RSV != 4 || got.Opcode != Binary {
				t.Errorf("%d bytes, masked %v: got %+v (raw equal %v)", n, masked, got.Opcode, bytes.Equal(raw, wire))
			}
			if masked && bytes.Contains(wire, payload) && n > 8 {
				t.Errorf("%d bytes: the masked frame carries the payload in the clear", n)
			}
		}
	}
}

// TestRFCExamples: the frames of RFC 6455 section 5.7.
func TestRFCExamples(t *testing.T) {
	for _, c := range []struct {
		wire []byte
		op   Opcode
		fin  bool
		want string
	}{
		{[]byte{0x81, 0x05, 0x48, 0x65, 0x6c, 0x6c, 0x6f}, Text, true, "Hello"},
		{[]byte{0x81, 0x85, 0x37, 0xfa, 0x21, 0x3d, 0x7f, 0x9f, 0x4d, 0x51, 0x58}, Text, true, "Hello"},
		{[]byte{0x01, 0x03, 0x48, 0x65, 0x6c}, Text, false, "Hel"},
		{[]byte{0x89, 0x05, 0x48, 0x65, 0x6c, 0x6c, 0x6f}, Ping, true, "Hello"},
	} {
		f, _, err := Read(bufio.NewReader(bytes.NewReader(c.wire)), 1<<10)
		if err != nil || f.Opcode != c.op || f.Fin != c.fin || string(f.Payload) != c.want {
			t.Errorf("%x: %+v %v; want %s fin %v %q", c.wire, f, err, c.op, c.fin, c.want)
		}
	}
}

func TestReadErrors(t *testing.T) {
	for _, c := range []struct {
		name string
		wire []byte
		want error
	}{
		{"empty", nil, io.EOF},
		{"one byte", []byte{0x81}, io.ErrUnexpectedEOF},
		{"cut payload", []byte{0x81, 0x05, 'H'}, io.ErrUnexpectedEOF},
		{"cut length", []byte{0x82, 126, 0}, io.ErrUnexpectedEOF},
		{"cut mask", []byte{0x82, 0x81, 1, 2}, io.ErrUnexpectedEOF},
		{"fragmented ping", []byte{0x09, 0x00}, ErrProtocol},
		{"long close", append([]byte{0x88, 126, 0, 200}, make([]byte, 200)...), ErrProtocol},
		{"reserved opcode", []byte{0x83, 0x00}, ErrProtocol},
		{"top bit length", []byte{0x82, 127, 0x80, 0, 0, 0, 0, 0, 0, 1}, ErrProtocol},
		{"too large", []byte{0x82, 126, 0x10, 0}, ErrTooLarge},
	} {
		_, _, err := Read(bufio.NewReader(bytes.NewReader(c.wire)), 1024)
		if !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}
}

func TestAssembler(t *testing.T) {
	var a Assembler
	frames := []Frame{
		{Opcode: Text, Payload: []byte("Hel")},
		{Fin: true, Opcode: Ping, Payload: []byte("p")},
		{Fin: true, Opcode: Continuation, Payload: []byte("lo")},
		{Fin: true, Opcode: Binary, Payload: []byte{0, 1}},
	}
	var got []string
	for _, f := range frames {
		m, err := a.Add(f)
		if err != nil {
			t.Fatal(err)
		}
		if m != nil {
			got = append(got, m.Opcode.String()+":"+string(m.Data))
		}
	}
	if want := "text:Hello|binary:\x00\x01"; strings.Join(got, "|") != want {
		t.Errorf("messages %q, want %q", strings.Join(got, "|"), want)
	}
	if _, err := a.Add(Frame{Fin: true, Opcode: Continuation}); !errors.Is(err, ErrProtocol) {
		t.Errorf("a lone continuation: %v, want ErrProtocol", err)
	}
	a.Add(Frame{Opcode: Text, Payload: []byte("x")})
	if _, err := a.Add(Frame{Fin: true, Opcode: Text}); !errors.Is(err, ErrProtocol) {
		t.Errorf("a text frame within a message: %v, want ErrProtocol", err)
	}
	small := Assembler{Max: 3}
	small.Add(Frame{Opcode: Text, Payload: []byte("ab")})
	if _, err := small.Add(Frame{Fin: true, Opcode: Continuation, Payload: []byte("cd")}); !errors.Is(err, ErrTooLarge) {
		t.Errorf("a message over Max: %v, want ErrTooLarge", err)
	}
	if code, reason := CloseCode(ClosePayload(1000, "bye")); code != 1000 || reason != "bye" {
		t.Errorf("CloseCode = %d %q", code, reason)
	}
	if code, _ := CloseCode(nil); code != 1005 {
		t.Errorf("CloseCode of nothing = %d, want 1005", code)
	}
}

// FuzzRead: whatever the bytes, Read neither panics nor returns a frame
// whose bytes, read again, differ from it; a frame re-encoded reads the
// same.
func FuzzRead(f *testing.F) {
	f.Add([]byte{0x81, 0x85, 0x37, 0xfa, 0x21, 0x3d, 0x7f, 0x9f, 0x4d, 0x51, 0x58})
	f.Add([]byte{0x82, 126, 0, 3, 1, 2, 3, 0x88, 0})
	f.Add([]byte{0x01, 0x01, 'a', 0x80, 0x01, 'b'})
	f.Fuzz(func(t *testing.T, wire []byte) {
		r := bufio.NewReader(bytes.NewReader(wire))
		var a Assembler
		for {
			fr, raw, err := Read(r, 1<<16)
			if err != nil {
				return
			}
			again, raw2, err := Read(bufio.NewReader(bytes.NewReader(raw)), 1<<16)
			if err != nil || !bytes.Equal(raw, raw2) || !bytes.Equal(again.Payload, fr.Payload) {
				t.Fatalf("the frame's bytes %x read again: %v", raw, err)
			}
			re := Append(nil, fr)
			back, _, err := Read(bufio.NewReader(bytes.NewReader(re)), 1<<16)
			if err != nil || !bytes.Equal(back.Payload, fr.Payload) || back.Opcode != fr.Opcode || back.Fin != fr.Fin {
				t.Fatalf("re-encoded %x: %v", re, err)
			}
			a.Add(fr)
		}
	})
}
