package store

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/klauspost/compress/zstd"
)

// MaxDataSize is the largest Event.Data the store writes and reads back.
// A framer splits longer lines into pieces marked FlagContinued.
const MaxDataSize = 256 << 20

// maxMetaSize bounds the JSON of one Recording.
const maxMetaSize = 4 << 20

// Every event value starts with a byte that says how the rest is encoded.
// A reader refuses an encoding it does not know, so that an older acptap
// stops at a newer value instead of misreading it. That is damage, not a
// newer format: a recording announces its format in its metadata
// (Recording.Format), which a reader checks first, and a recording of a
// known format holds only encodings of that format.
//
// An event value (encoding 1) holds one event:
//
//	byte    encoding, 1
//	byte    Kind
//	byte    Lane
//	byte    Flags
//	varint  Offset in nanoseconds (zig-zag, as encoding/binary.AppendVarint)
//	...     Data as one zstd frame; nothing when Data is empty
//
// A frame block (encoding 2) holds a run of KindFrame events with
// consecutive Seqs, the first one's Seq being the value's key:
//
//	byte    encoding, 2
//	uvarint n, the number of events, 1 to maxBlockEvents
//	...     one zstd frame of the body: for each event, in Seq order,
//	            byte    Lane
//	            byte    Flags
//	            varint  Offset minus the previous event's Offset (the
//	                    first event's minus zero), wrapping
//	            uvarint len(Data)
//	            ...     Data
//
// Headers are not compressed so that a reader refuses an unknown encoding
// before it touches the payload, and a writer learns which Seqs and kinds
// a value holds, for the counters, without decompressing it. The Seq (of
// the first event) is the value's key.
//
// Frames are stored in blocks because a stdio line is small: one zstd
// frame and one bbolt value each cost more than the line, and a block
// lets zstd see what lines share (JSON-RPC envelopes, method names). The
// Writer packs the runs of frames of each commit (see blockRun); which
// frames share a block depends on how it batched them, so a reader takes
// either encoding anywhere, and keys never overlap: an event stored at a
// Seq inside a block replaces the block's event, which the Writer splits
// the block to drop (see clearSpan). A block's body is at most
// maxBlockBody bytes, which bounds what a reader decompresses for it; a
// frame too big to fit in a block on its own is stored as an event value,
// like exchanges, which are replaced by Seq and so never share a value.
const (
	eventEncoding = 1
	blockEncoding = 2
)

// eventHeaderSize is the size of the fixed part of an event value's header.
const eventHeaderSize = 4

// Limits of a frame block.
const (
	maxBlockBody   = 256 << 10 // bytes of a block's uncompressed body
	maxBlockEvents = 4096      // events in a block
	// minRecordSize is the smallest record of a block's body: lane,
	// flags, a one-byte offset delta and a one-byte length.
	minRecordSize = 4
)

var (
	// encoder compresses event values and frame blocks. EncodeAll is safe
	// for concurrent use.
	encoder = sync.OnceValues(func() (*zstd.Encoder, error) {
		return zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest))
	})
	// metaEncoder compresses metadata without entropy coding. The JSON of
	// a Recording is a few hundred bytes, rewritten at every commit for
	// the counters; Huffman and FSE tables for so little save a hundred
	// bytes and take three times the CPU (about 10µs), which a busy
	// Writer spends hundreds of times a second.
	metaEncoder = sync.OnceValues(func() (*zstd.Encoder, error) {
		return zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithNoEntropyCompression(true))
	})
	// dataDecoder decompresses the Data of event values, refusing more
	// than MaxDataSize.
	dataDecoder = sync.OnceValues(func() (*zstd.Decoder, error) {
		return zstd.NewReader(nil,
			zstd.WithDecoderMaxMemory(MaxDataSize),
			zstd.WithDecoderMaxWindow(MaxDataSize))
	})
	// blockDecoder decompresses the body of frame blocks, refusing more
	// than maxBlockBody: a few bytes of a damaged or hostile value cannot
	// make a reader allocate more than a block.
	blockDecoder = sync.OnceValues(func() (*zstd.Decoder, error) {
		return zstd.NewReader(nil,
			zstd.WithDecoderMaxMemory(maxBlockBody),
			zstd.WithDecoderMaxWindow(maxBlockBody))
	})
	// metaDecoder decompresses metadata, refusing more than maxMetaSize.
	metaDecoder = sync.OnceValues(func() (*zstd.Decoder, error) {
		return zstd.NewReader(nil,
			zstd.WithDecoderMaxMemory(maxMetaSize),
			zstd.WithDecoderMaxWindow(maxMetaSize))
	})
)

// encodeEvent returns the event value of e; e.Seq is not part of it.
func encodeEvent(e *Event) ([]byte, error) {
	return appendEvent(nil, e)
}

// appendEvent appends the event value of e to dst.
func appendEvent(dst []byte, e *Event) ([]byte, error) {
	if len(e.Data) > MaxDataSize {
		return dst, fmt.Errorf("event %d: %d bytes of data exceed the limit of %d", e.Seq, len(e.Data), MaxDataSize)
	}
	if dst == nil {
		dst = make([]byte, 0, eventHeaderSize+binary.MaxVarintLen64+len(e.Data)/2+64)
	}
	dst = append(dst, eventEncoding, byte(e.Kind), byte(e.Lane), byte(e.Flags))
	dst = binary.AppendVarint(dst, int64(e.Offset))
	if len(e.Data) == 0 {
		return dst, nil
	}
	enc, err := encoder()
	if err != nil {
		return dst, fmt.Errorf("zstd encoder: %w", err)
	}
	return enc.EncodeAll(e.Data, dst), nil
}

// decodeEvent decodes an event value. The returned Data never aliases v.
func decodeEvent(seq uint64, v []byte) (Event, error) {
	if len(v) == 0 {
		return Event{}, errors.New("empty event value")
	}
	if v[0] != eventEncoding {
		return Event{}, errEncoding(v[0])
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

// recordSize is the size of e's record in a block's body after an event
// at offset prev.
func recordSize(e *Event, prev time.Duration) int {
	return 2 + varintLen(int64(e.Offset-prev)) + uvarintLen(uint64(len(e.Data))) + len(e.Data)
}

func varintLen(x int64) int {
	ux := uint64(x) << 1
	if x < 0 {
		ux = ^ux
	}
	return uvarintLen(ux)
}

func uvarintLen(x uint64) int {
	n := 1
	for ; x >= 0x80; x >>= 7 {
		n++
	}
	return n
}

// blockRun returns how many events at the start of events make one frame
// block: frames with consecutive Seqs whose records fit in maxBlockBody,
// at most maxBlockEvents of them. It returns 0 when the first event
// cannot be in a block: it is not a frame, or it is too big.
//
// A gap in the Seqs ends a block: the missing Seq was reserved for an
// exchange that comes later under its own key, and a block spanning it
// would make Events return Seqs out of order.
func blockRun(events []Event) int {
	size := 0
	var prev time.Duration
	for n := range events {
		e := &events[n]
		// Seq 0 is never handed out; here it would be the Seq after the
		// largest, which decodeBlock refuses.
		if e.Kind != KindFrame || n == maxBlockEvents || n > 0 && (e.Seq != events[n-1].Seq+1 || e.Seq == 0) {
			return n
		}
		size += recordSize(e, prev)
		if size > maxBlockBody {
			return n
		}
		prev = e.Offset
	}
	return len(events)
}

// appendBlockBody appends the uncompressed body of a block of events to
// body. The events must make a block (see blockRun).
func appendBlockBody(body []byte, events []Event) []byte {
	var prev time.Duration
	for i := range events {
		e := &events[i]
		body = append(body, byte(e.Lane), byte(e.Flags))
		body = binary.AppendVarint(body, int64(e.Offset-prev))
		body = binary.AppendUvarint(body, uint64(len(e.Data)))
		body = append(body, e.Data...)
		prev = e.Offset
	}
	return body
}

// appendBlock appends to dst the frame block of n events whose body is
// body.
func appendBlock(dst, body []byte, n int) ([]byte, error) {
	enc, err := encoder()
	if err != nil {
		return dst, fmt.Errorf("zstd encoder: %w", err)
	}
	dst = append(dst, blockEncoding)
	dst = binary.AppendUvarint(dst, uint64(n))
	return enc.EncodeAll(body, dst), nil
}

// encodeBlock returns the frame block of events, which must be all of a
// block (see blockRun).
func encodeBlock(events []Event) ([]byte, error) {
	if len(events) == 0 {
		return nil, errors.New("a frame block of no events")
	}
	if blockRun(events) != len(events) {
		return nil, fmt.Errorf("events %d to %d do not make a frame block", events[0].Seq, events[len(events)-1].Seq)
	}
	return appendBlock(nil, appendBlockBody(nil, events), len(events))
}

// blockHeader returns the number of events of a frame block and the size
// of its header.
func blockHeader(first uint64, v []byte) (n uint64, size int, err error) {
	if len(v) == 0 || v[0] != blockEncoding {
		return 0, 0, errors.New("not a frame block")
	}
	n, size = binary.Uvarint(v[1:])
	switch {
	case size <= 0:
		return 0, 0, errors.New("frame block header malformed")
	case n == 0 || n > maxBlockEvents:
		return 0, 0, fmt.Errorf("frame block of %d events, want 1 to %d", n, maxBlockEvents)
	case first > math.MaxUint64-(n-1):
		return 0, 0, fmt.Errorf("frame block of %d events overflows the Seqs", n)
	}
	return n, 1 + size, nil
}

// decodeBlock appends the events of a frame block stored under key first
// to dst. Their Data share one array, allocated here, that never aliases v:
// each one is capped so that appending to it cannot reach the next.
func decodeBlock(dst []Event, first uint64, v []byte) ([]Event, error) {
	n, hsize, err := blockHeader(first, v)
	if err != nil {
		return dst, err
	}
	dec, err := blockDecoder()
	if err != nil {
		return dst, fmt.Errorf("zstd decoder: %w", err)
	}
	body, err := dec.DecodeAll(v[hsize:], nil)
	if err != nil {
		return dst, fmt.Errorf("frame block: %w", err)
	}
	if uint64(len(body)) < n*minRecordSize {
		return dst, fmt.Errorf("frame block of %d events has only %d bytes", n, len(body))
	}
	var prev time.Duration
	for i := range n {
		if len(body) < 2 {
			return dst, fmt.Errorf("frame block: event %d truncated", first+i)
		}
		e := Event{Seq: first + i, Kind: KindFrame, Lane: Lane(body[0]), Flags: Flag(body[1])}
		delta, k := binary.Varint(body[2:])
		if k <= 0 {
			return dst, fmt.Errorf("frame block: event %d: offset malformed", first+i)
		}
		body = body[2+k:]
		size, k := binary.Uvarint(body)
		if k <= 0 || size > uint64(len(body)-k) {
			return dst, fmt.Errorf("frame block: event %d: data length malformed or truncated", first+i)
		}
		end := k + int(size)
		if size > 0 {
			e.Data = body[k:end:end]
		}
		body = body[end:]
		e.Offset = prev + time.Duration(delta)
		prev = e.Offset
		dst = append(dst, e)
	}
	if len(body) != 0 {
		return dst, fmt.Errorf("frame block: %d bytes after its %d events", len(body), n)
	}
	return dst, nil
}

// decodeValue appends the events of the value v, stored under key seq, to
// dst, in Seq order.
func decodeValue(dst []Event, seq uint64, v []byte) ([]Event, error) {
	if len(v) == 0 {
		return dst, errors.New("empty event value")
	}
	switch v[0] {
	case eventEncoding:
		e, err := decodeEvent(seq, v)
		if err != nil {
			return dst, err
		}
		return append(dst, e), nil
	case blockEncoding:
		return decodeBlock(dst, seq, v)
	}
	return dst, errEncoding(v[0])
}

// valueSpan returns the kind and number of the events of the value v,
// stored under key seq, without decompressing it: they have the Seqs seq
// to seq+n-1.
func valueSpan(seq uint64, v []byte) (kind Kind, n uint64, err error) {
	if len(v) == 0 {
		return 0, 0, errors.New("empty event value")
	}
	switch v[0] {
	case eventEncoding:
		if len(v) < eventHeaderSize+1 {
			return 0, 0, errors.New("event header truncated")
		}
		return Kind(v[1]), 1, nil
	case blockEncoding:
		n, _, err := blockHeader(seq, v)
		return KindFrame, n, err
	}
	return 0, 0, errEncoding(v[0])
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
	enc, err := metaEncoder()
	if err != nil {
		return nil, fmt.Errorf("zstd encoder: %w", err)
	}
	return enc.EncodeAll(js, nil), nil
}

// errEncoding is said of an event value of an unknown encoding.
func errEncoding(b byte) error { return fmt.Errorf("unknown event encoding %d", b) }

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
