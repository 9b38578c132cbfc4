// Package wsframe reads and writes the frames of a WebSocket connection (RFC 6455), as a proxy in its middle sees them.
//
// A proxy relays each frame as it was read (Read returns its bytes) and
// keeps the messages the frames make (Assembler): the payloads of a
// message's data frames, unmasked and joined.
package wsframe

import (
	"bufio"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// Opcode is a frame's opcode.
type Opcode uint8

// The opcodes of RFC 6455.
const (
	Continuation Opcode = 0x0
	Text         Opcode = 0x1
	Binary       Opcode = 0x2
	Close        Opcode = 0x8
	Ping         Opcode = 0x9
	Pong         Opcode = 0xa
)

// Control reports whether o is a control opcode (close, ping, pong).
func (o Opcode) Control() bool { return o&0x8 != 0 }

// String returns the opcode's name.
func (o Opcode) String() string {
	switch o {
	case Continuation:
		return "continuation"
	case Text:
		return "text"
	case Binary:
		return "binary"
	case Close:
		return "close"
	case Ping:
		return "ping"
	case Pong:
		return "pong"
	}
	return fmt.Sprintf("opcode(%#x)", uint8(o))
}

// A Frame is one frame, its payload unmasked.
type Frame struct {
	Fin    bool
	RSV    uint8 // the three reserved bits, RSV1 the highest (4): set by an extension
	Opcode Opcode
	// Masked says the payload was (or is to be) masked with Mask, as a
	// client's frames are.
	Masked  bool
	Mask    [4]byte
	Payload []byte
}

// Errors of Read.
var (
	// ErrProtocol is a frame RFC 6455 does not allow: a control frame
	// fragmented or longer than 125 bytes, a length with its top bit
	// set, an unknown opcode.
	ErrProtocol = errors.New("websocket protocol error")
	// ErrTooLarge is a frame longer than Read's limit.
	ErrTooLarge = errors.New("websocket frame too large")
)

// Read reads one frame from r, whose payload may be at most max bytes,
// and returns it with its payload unmasked, and the frame's bytes as
// read, to be relayed as they were. At the end of r before a frame
// begins it returns io.EOF; within one, io.ErrUnexpectedEOF.
func Read(r *bufio.Reader, max int64) (Frame, []byte, error) {
	var f Frame
	head := make([]byte, 2, 14)
	if _, err := io.ReadFull(r, head); err != nil {
		return f, nil, err // io.EOF before a frame, io.ErrUnexpectedEOF within
	}
	f.Fin = head[0]&0x80 != 0
	f.RSV = head[0] >> 4 & 0x7
	f.Opcode = Opcode(head[0] & 0xf)
	f.Masked = head[1]&0x80 != 0
	n := int64(head[1] & 0x7f)
	switch n {
	case 126:
		ext, err := more(r, &head, 2)
		if err != nil {
			return f, nil, err
		}
		n = int64(binary.BigEndian.Uint16(ext))
	case 127:
		ext, err := more(r, &head, 8)
		if err != nil {
			return f, nil, err
		}
		u := binary.BigEndian.Uint64(ext)
		if u>>63 != 0 {
			return f, nil, fmt.Errorf("%w: a length with its top bit set", ErrProtocol)
		}
		n = int64(u)
	}
	switch {
	case f.Opcode > Binary && f.Opcode < Close || f.Opcode > Pong:
		return f, nil, fmt.Errorf("%w: %s", ErrProtocol, f.Opcode)
	case f.Opcode.Control() && (!f.Fin || n > 125):
		return f, nil, fmt.Errorf("%w: a %s frame fragmented or longer than 125 bytes", ErrProtocol, f.Opcode)
	case n > max:
		return f, nil, fmt.Errorf("%w: %d bytes, more than %d", ErrTooLarge, n, max)
	}
	if f.Masked {
		key, err := more(r, &head, 4)
		if err != nil {
			return f, nil, err
		}
		copy(f.Mask[:], key)
	}
	raw := make([]byte, len(head)+int(n))
	copy(raw, head)
	if _, err := io.ReadFull(r, raw[len(head):]); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return f, nil, err
	}
	f.Payload = make([]byte, n)
	copy(f.Payload, raw[len(head):])
	if f.Masked {
		mask(f.Payload, f.Mask)
	}
	return f, raw, nil
}

// more reads n more bytes of a frame's head onto *head and returns them.
func more(r *bufio.Reader, head *[]byte, n int) ([]byte, error) {
	start := len(*head)
	*head = append(*head, make([]byte, n)...)
	if _, err := io.ReadFull(r, (*head)[start:]); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	return (*head)[start:], nil
}

// mask masks (or unmasks) p in place with key.
func mask(p []byte, key [4]byte) {
	for i := range p {
		p[i] ^= key[i&3]
	}
}

// Append appends f, encoded, to b: its payload masked with f.Mask if
// f.Masked.
func Append(b []byte, f Frame) []byte {
	b0 := byte(f.Opcode&0xf) | f.RSV&0x7<<4
	if f.Fin {
		b0 |= 0x80
	}
	b = append(b, b0)
	var m byte
	if f.Masked {
		m = 0x80
	}
	n := len(f.Payload)
	switch {
	case n < 126:
		b = append(b, m|byte(n))
	case n <= 0xffff:
		b = append(b, m|126)
		b = binary.BigEndian.AppendUint16(b, uint16(n))
	default:
		b = append(b, m|127)
		b = binary.BigEndian.AppendUint64(b, uint64(n))
	}
	if f.Masked {
		b = append(b, f.Mask[:]...)
	}
	start := len(b)
	b = append(b, f.Payload...)
	if f.Masked {
		mask(b[start:], f.Mask)
	}
	return b
}

// ClientFrame returns a final frame of a client's, of op and payload,
// masked with a random key as RFC 6455 requires of clients.
func ClientFrame(op Opcode, payload []byte) Frame {
	f := Frame{Fin: true, Opcode: op, Masked: true, Payload: payload}
	rand.Read(f.Mask[:])
	return f
}

// ServerFrame returns a final, unmasked frame of op and payload.
func ServerFrame(op Opcode, payload []byte) Frame {
	return Frame{Fin: true, Opcode: op, Payload: payload}
}

// ClosePayload returns the payload of a close frame of code and reason.
func ClosePayload(code uint16, reason string) []byte {
	return append(binary.BigEndian.AppendUint16(nil, code), reason...)
}

// CloseCode returns the code and reason of a close frame's payload:
// 1005 (no status) for an empty one.
func CloseCode(payload []byte) (uint16, string) {
	if len(payload) < 2 {
		return 1005, ""
	}
	return binary.BigEndian.Uint16(payload), string(payload[2:])
}

// A Message is a data message: a text or binary frame and its
// continuations, joined.
type Message struct {
	Opcode Opcode // Text or Binary
	Data   []byte
}

// An Assembler joins a connection's data frames, in one direction, into
// messages. Control frames may come between the frames of a message.
type Assembler struct {
	// Max bounds a message's size; 0 is no bound.
	Max int64

	open *Message // the message whose frames are coming; nil between messages
}

// Add takes the next frame and returns the message it completes, if it
// is a data frame that does, or nil. A continuation without a message
// to continue, or a data frame within a message, is ErrProtocol; a
// message larger than Max, ErrTooLarge.
func (a *Assembler) Add(f Frame) (*Message, error) {
	switch {
	case f.Opcode.Control():
		return nil, nil
	case f.Opcode == Continuation && a.open == nil:
		return nil, fmt.Errorf("%w: a continuation frame without a message", ErrProtocol)
	case f.Opcode != Continuation && a.open != nil:
		return nil, fmt.Errorf("%w: a %s frame within a message", ErrProtocol, f.Opcode)
	case f.Opcode != Continuation:
		a.open = &Message{Opcode: f.Opcode}
	}
	if a.Max > 0 && int64(len(a.open.Data)+len(f.Payload)) > a.Max {
		a.open = nil
		return nil, fmt.Errorf("%w: a message of more than %d bytes", ErrTooLarge, a.Max)
	}
	a.open.Data = append(a.open.Data, f.Payload...)
	if !f.Fin {
		return nil, nil
	}
	m := a.open
	a.open = nil
	return m, nil
}
