package tapproc

import (
	"encoding/binary"
	"fmt"
	"io"
	"time"
)

// The tap process and its parent talk over two pipes and share one
// clock:
//
//   - the tap process's stdin carries the parent's settings, one message,
//     after the tap process's hello; then nothing. Its end (the parent's
//     Close, or its death) closes the tap.
//   - the tap process's stdout carries messages: hello, then ready or
//     failed, then notices and the exchanges, Started's and Ended's, in the
//     order the tap gave them.
//   - its fd 3 is the SharedClock's file, which it maps to stamp exchanges.
//
// A message is a header (kind, the exchange's id (its Stamp), its time, the
// payload's length) and its payload.

// kind is a message's kind.
type kind uint8

const (
	kindHello    kind = iota + 1 // payload: helloMagic
	kindSettings                 // parent to tap: payload: settings as JSON
	kindReady                    // payload: ready as JSON
	kindFailed                   // payload: failure as JSON
	kindNotice                   // payload: one line of the tap's, for Logf
	kindStarted                  // id, at; payload: the exchange in flight (appendExchange)
	kindEnded                    // id, at; payload: the exchange as it ended (appendExchange)
)

// helloMagic is the hello's payload: a program that answers with
// anything else is not the tap process of this version.
const helloMagic = "acptap tap process 1"

// headerSize is the size of a message's header: kind, id, at, length,
// the last at lengthAt.
const (
	headerSize = 1 + 8 + 8 + 4
	lengthAt   = 1 + 8 + 8
)

// maxPayload bounds a message's payload: an exchange of at most what the
// store keeps of one event, 256 MiB, and its request twice at most.
const maxPayload = 512 << 20

// message is one message on a pipe.
type message struct {
	kind    kind
	id      uint64
	at      time.Duration
	payload []byte
}

// appendMessage appends m's encoding to b.
func appendMessage(b []byte, m message) []byte {
	b = append(b, byte(m.kind))
	b = binary.LittleEndian.AppendUint64(b, m.id)
	b = binary.LittleEndian.AppendUint64(b, uint64(m.at))
	b = binary.LittleEndian.AppendUint32(b, uint32(len(m.payload)))
	return append(b, m.payload...)
}

// readMessage reads one message from r, of at most max bytes of payload.
// At a clean end between messages it returns io.EOF; within one,
// io.ErrUnexpectedEOF.
func readMessage(r io.Reader, max uint32) (message, error) {
	var h [headerSize]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return message{}, err
	}
	m := message{
		kind: kind(h[0]),
		id:   binary.LittleEndian.Uint64(h[1:]),
		at:   time.Duration(binary.LittleEndian.Uint64(h[9:])),
	}
	n := binary.LittleEndian.Uint32(h[lengthAt:])
	if m.kind < kindHello || m.kind > kindEnded {
		return message{}, fmt.Errorf("message of unknown kind %d", m.kind)
	}
	if n > max {
		return message{}, fmt.Errorf("message of %d bytes, more than %d", n, max)
	}
	m.payload = make([]byte, n)
	if _, err := io.ReadFull(r, m.payload); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return message{}, err
	}
	return m, nil
}
