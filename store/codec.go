package store

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/klauspost/compress/zstd"
)

// MaxDataSize is the largest Event.Data the store writes and reads back.
// A framer splits longer lines into pieces marked FlagContinued.
const MaxDataSize = 256 << 20

// maxMetaSize bounds the JSON of one Recording.
const maxMetaSize = 4 << 20

// eventEncoding is the first byte of every event value.
//
// An event value (encoding 1) is
//
//	byte    encoding, 1
//	byte    Kind
//	byte    Lane
//	byte    Flags
//	varint  Offset in nanoseconds (zig-zag, as encoding/binary.AppendVarint)
//	...     Data as one zstd frame; nothing when Data is empty
//
// The header is not compressed so that a reader refuses an unknown encoding
// before it touches the payload, and a writer learns the kind of a value it
// replaces without decompressing it. The Seq is the value's key.
const eventEncoding = 1

// eventHeaderSize is the size of the fixed part of the header.
const eventHeaderSize = 4

var (
	// encoder compresses every value. EncodeAll is safe for concurrent use.
	encoder = sync.OnceValues(func() (*zstd.Encoder, error) {
		return zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest))
	})
	// dataDecoder decompresses event payloads, refusing more than MaxDataSize.
	dataDecoder = sync.OnceValues(func() (*zstd.Decoder, error) {
		return zstd.NewReader(nil,
			zstd.WithDecoderMaxMemory(MaxDataSize),
			zstd.WithDecoderMaxWindow(MaxDataSize))
	})
	// metaDecoder decompresses metadata, refusing more than maxMetaSize.
	metaDecoder = sync.OnceValues(func() (*zstd.Decoder, error) {
		return zstd.NewReader(nil,
			zstd.WithDecoderMaxMemory(maxMetaSize),
			zstd.WithDecoderMaxWindow(maxMetaSize))
	})
)

// encodeEvent returns the stored form of e; e.Seq is not part of it.
func encodeEvent(e *Event) ([]byte, error) {
	if len(e.Data) > MaxDataSize {
		return nil, fmt.Errorf("event %d: %d bytes of data exceed the limit of %d", e.Seq, len(e.Data), MaxDataSize)
	}
	buf := make([]byte, 0, eventHeaderSize+binary.MaxVarintLen64+len(e.Data)/2+64)
	buf = append(buf, eventEncoding, byte(e.Kind), byte(e.Lane), byte(e.Flags))
	buf = binary.AppendVarint(buf, int64(e.Offset))
	if len(e.Data) == 0 {
		return buf, nil
	}
	enc, err := encoder()
	if err != nil {
		return nil, fmt.Errorf("zstd encoder: %w", err)
	}
	return enc.EncodeAll(e.Data, buf), nil
}

// decodeEvent is the inverse of encodeEvent. The returned Data never
// aliases v.
func decodeEvent(seq uint64, v []byte) (Event, error) {
	if len(v) == 0 {
		return Event{}, errors.New("empty event value")
	}
	if v[0] != eventEncoding {
		return Event{}, fmt.Errorf("event encoding %d: %w", v[0], ErrUnknownFormat)
	}
	if len(v) < eventHeaderSize+1 {
		return Event{}, errors.New("event header truncated")
	}
	off, n := binary.Varint(v[eventHeaderSize:])
	if n <= 0 {
		return Event{}, errors.New("event offset malformed")
	}
	e := Event{
		Seq:    seq,
		Kind:   Kind(v[1]),
		Lane:   Lane(v[2]),
		Flags:  Flag(v[3]),
		Offset: time.Duration(off),
	}
	payload := v[eventHeaderSize+n:]
	if len(payload) == 0 {
		return e, nil
	}
	dec, err := dataDecoder()
	if err != nil {
		return Event{}, fmt.Errorf("zstd decoder: %w", err)
	}
	data, err := dec.DecodeAll(payload, nil)
	if err != nil {
		return Event{}, fmt.Errorf("event data: %w", err)
	}
	e.Data = data
	return e, nil
}

// kindOf returns the Kind of a stored event without decoding it.
func kindOf(v []byte) (Kind, error) {
	if len(v) > 0 && v[0] != eventEncoding {
		return 0, fmt.Errorf("event encoding %d: %w", v[0], ErrUnknownFormat)
	}
	if len(v) < eventHeaderSize+1 {
		return 0, errors.New("event header truncated")
	}
	return Kind(v[1]), nil
}

// encodeMeta returns the stored form of r: zstd-compressed JSON.
func encodeMeta(r *Recording) ([]byte, error) {
	js, err := json.Marshal(r)
	if err != nil {
		return nil, fmt.Errorf("metadata: %w", err)
	}
	if len(js) > maxMetaSize {
		return nil, fmt.Errorf("metadata: %d bytes exceed the limit of %d", len(js), maxMetaSize)
	}
	enc, err := encoder()
	if err != nil {
		return nil, fmt.Errorf("zstd encoder: %w", err)
	}
	return enc.EncodeAll(js, nil), nil
}

// decodeMeta is the inverse of encodeMeta.
func decodeMeta(v []byte) (Recording, error) {
	dec, err := metaDecoder()
	if err != nil {
		return Recording{}, fmt.Errorf("zstd decoder: %w", err)
	}
	js, err := dec.DecodeAll(v, nil)
	if err != nil {
		return Recording{}, fmt.Errorf("metadata: %w", err)
	}
	var r Recording
	if err := json.Unmarshal(js, &r); err != nil {
		return Recording{}, fmt.Errorf("metadata: %w", err)
	}
	return r, nil
}
