package store

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/klauspost/compress/zstd"
)

func mustEncodeEvent(t testing.TB, e Event) []byte {
	t.Helper()
	v, err := encodeEvent(&e)
	if err != nil {
		t.Fatalf("encodeEvent(%s): %v", describe(e), err)
	}
	return v
}

func FuzzDecodeEvent(f *testing.F) {
	f.Add([]byte{}, uint8(KindFrame), uint8(LaneAgent), uint8(0), int64(0), []byte(nil))
	f.Add(mustEncodeEvent(f, Event{Kind: KindFrame, Lane: LaneEditor, Offset: time.Second, Data: []byte(`{"jsonrpc":"2.0"}`)}),
		uint8(KindExchange), uint8(LaneLLM), uint8(FlagIncomplete), int64(-1), []byte("\xff\x00"))
	f.Add(mustEncodeEvent(f, Event{Kind: KindFrame, Lane: LaneStderr, Flags: FlagNoNewline | FlagContinued}),
		uint8(0), uint8(255), uint8(255), int64(1<<62), bytes.Repeat([]byte("ab"), 1000))
	f.Add([]byte{blockEncoding + 1, 1, 1, 0, 0}, uint8(1), uint8(1), uint8(0), int64(0), []byte{})
	f.Add([]byte{eventEncoding, 1, 1, 0, 0x80}, uint8(1), uint8(1), uint8(0), int64(0), []byte{})
	f.Add([]byte{eventEncoding, 1, 1, 0, 0, 0x28, 0xb5, 0x2f, 0xfd}, uint8(1), uint8(1), uint8(0), int64(0), []byte{})
	f.Fuzz(func(t *testing.T, raw []byte, kind, lane, flags uint8, offset int64, data []byte) {
		// Any value decodes or fails; what decodes re-encodes to itself.
		if e, err := decodeEvent(7, raw); err == nil {
			again, err := decodeEvent(7, mustEncodeEvent(t, e))
			if err != nil || !eventEqual(again, e) {
				t.Fatalf("re-encoding %s decodes to %s, %v", describe(e), describe(again), err)
			}
			// A reader that does not know the encoding: decodeValue.
			events, err := decodeValue(nil, 7, raw)
			if err != nil || len(events) != 1 || !eventEqual(events[0], e) {
				t.Fatalf("decodeValue of an event value = %d events, %v; want %s", len(events), err, describe(e))
			}
		} else if len(raw) > 0 && raw[0] != eventEncoding && (err == nil || errors.Is(err, ErrUnknownFormat)) {
			t.Fatalf("decodeEvent of encoding %d: %v, want an error, not ErrUnknownFormat", raw[0], err)
		}
		// Damage is never blamed on a newer format.
		if _, err := decodeValue(nil, 7, raw); errors.Is(err, ErrUnknownFormat) || len(raw) > 0 && raw[0] > blockEncoding && err == nil {
			t.Fatalf("decodeValue of encoding %d: %v, want an error, not ErrUnknownFormat", raw[0], err)
		}

		want := Event{Seq: 9, Kind: Kind(kind), Lane: Lane(lane), Flags: Flag(flags), Offset: time.Duration(offset), Data: data}
		v := mustEncodeEvent(t, want)
		if k, n, err := valueSpan(want.Seq, v); err != nil || k != want.Kind || n != 1 {
			t.Fatalf("valueSpan = %d, %d, %v; want %d, 1", k, n, err, want.Kind)
		}
		got, err := decodeEvent(9, v)
		if err != nil {
			t.Fatalf("decodeEvent(encodeEvent(%s)): %v", describe(want), err)
		}
		if !eventEqual(got, want) {
			t.Fatalf("round trip:\ngot  %s\nwant %s", describe(got), describe(want))
		}
		// The decoded Data is its own: the value may go (bbolt reuses it).
		for i := range v {
			v[i] = ^v[i]
		}
		if !bytes.Equal(got.Data, data) {
			t.Fatalf("decoded Data changed with the stored value")
		}
	})
}

func FuzzDecodeMeta(f *testing.F) {
	enc, err := encoder()
	if err != nil {
		f.Fatal(err)
	}
	f.Add([]byte(`{"name":"x","format":1}`), "fix-typo", "codex-acp", "/work", int64(1700000000e9), true, 130, int64(time.Second))
	f.Add([]byte(`{"created":"not a time"}`), "", "", "", int64(0), false, 0, int64(0))
	f.Add(enc.EncodeAll([]byte(`{"argv":"not a list"}`), nil), "a", "\x00", "é", int64(-1), false, -1, int64(-1))
	f.Fuzz(func(t *testing.T, raw []byte, name, arg, cwd string, created int64, done bool, exit int, duration int64) {
		// Any value decodes or fails, compressed or not.
		decodeMeta(raw)
		decodeMeta(enc.EncodeAll(raw, nil))

		if !utf8.ValidString(name) || !utf8.ValidString(arg) || !utf8.ValidString(cwd) {
			// JSON holds only UTF-8: invalid bytes come back as U+FFFD.
			return
		}
		want := Recording{
			Name: name, Format: FormatVersion, Created: time.Unix(0, created).UTC(), Version: "v0",
			Argv: []string{arg, arg + cwd}, Cwd: cwd, EnvNames: []string{name},
			Done: done, ExitCode: exit, Signal: arg, Error: cwd, Duration: time.Duration(duration),
			Frames: exit, Exchanges: -exit,
		}
		v, err := encodeMeta(&want)
		if err != nil {
			t.Fatalf("encodeMeta(%+v): %v", want, err)
		}
		got, err := decodeMeta(v)
		if err != nil {
			t.Fatalf("decodeMeta(encodeMeta(%+v)): %v", want, err)
		}
		if !got.Created.Equal(want.Created) {
			t.Fatalf("Created = %v, want %v", got.Created, want.Created)
		}
		got.Created = want.Created
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("round trip:\ngot  %+v\nwant %+v", got, want)
		}
	})
}

// rleFrame returns a zstd frame without a content size that decodes to n
// bytes of 'x' using RLE blocks: a few bytes that decompress to a lot.
func rleFrame(n int) []byte {
	const blockMax = 128 << 10
	// Magic, no content size, no checksum, a 128 KiB window.
	frame := []byte{0x28, 0xb5, 0x2f, 0xfd, 0x00, 7 << 3}
	for n > 0 {
		size := min(n, blockMax)
		n -= size
		last := 0
		if n == 0 {
			last = 1
		}
		h := uint32(last) | 1<<1 | uint32(size)<<3
		frame = append(frame, byte(h), byte(h>>8), byte(h>>16), 'x')
	}
	return frame
}

func TestRLEFrame(t *testing.T) {
	// The bomb tests below mean something only if rleFrame's frames decode.
	dec, err := zstd.NewReader(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer dec.Close()
	n := 300<<10 + 5
	got, err := dec.DecodeAll(rleFrame(n), nil)
	if err != nil || !bytes.Equal(got, bytes.Repeat([]byte("x"), n)) {
		t.Fatalf("rleFrame(%d) decodes to %d bytes, %v; want %d x", n, len(got), err, n)
	}
}

func TestDecompressionBombs(t *testing.T) {
	// Metadata of more than maxMetaSize.
	if _, err := decodeMeta(rleFrame(maxMetaSize + 1)); !errors.Is(err, zstd.ErrDecoderSizeExceeded) {
		t.Errorf("decodeMeta of %d bytes = %v, want zstd.ErrDecoderSizeExceeded", maxMetaSize+1, err)
	}
	if _, err := decodeMeta(rleFrame(maxMetaSize - 10)); errors.Is(err, zstd.ErrDecoderSizeExceeded) {
		t.Errorf("decodeMeta of less than the limit: %v", err)
	}

	header := []byte{eventEncoding, byte(KindFrame), byte(LaneAgent), 0, 0}
	// A frame that says how big it is.
	declared := binary.LittleEndian.AppendUint64([]byte{0x28, 0xb5, 0x2f, 0xfd, 0xe0}, 1<<40)
	declared = append(declared, 1|1<<1|16<<3, 0, 0, 'x')
	if _, err := decodeEvent(1, append(header, declared...)); !errors.Is(err, zstd.ErrDecoderSizeExceeded) {
		t.Errorf("decodeEvent of a frame declaring 1 TiB = %v, want zstd.ErrDecoderSizeExceeded", err)
	}
	// A frame block decodes to at most maxBlockBody, whatever its frame
	// says or does not say.
	block := []byte{blockEncoding, 1}
	if _, err := decodeBlock(nil, 1, append(block, declared...)); !errors.Is(err, zstd.ErrDecoderSizeExceeded) {
		t.Errorf("decodeBlock of a frame declaring 1 TiB = %v, want zstd.ErrDecoderSizeExceeded", err)
	}
	if _, err := decodeBlock(nil, 1, append(block, rleFrame(maxBlockBody+1)...)); !errors.Is(err, zstd.ErrDecoderSizeExceeded) {
		t.Errorf("decodeBlock of %d bytes = %v, want zstd.ErrDecoderSizeExceeded", maxBlockBody+1, err)
	}
	// Within the limit, the body decodes (and is nonsense).
	if _, err := decodeBlock(nil, 1, append(block, rleFrame(maxBlockBody)...)); err == nil || errors.Is(err, zstd.ErrDecoderSizeExceeded) {
		t.Errorf("decodeBlock of %d bytes of 'x' = %v, want an error about the body", maxBlockBody, err)
	}

	// A frame that does not. Decoding 256 MiB takes a while under -race.
	if testing.Short() {
		t.Skip("decoding 256 MiB in -short mode")
	}
	if _, err := decodeEvent(1, append(header, rleFrame(MaxDataSize+1)...)); !errors.Is(err, zstd.ErrDecoderSizeExceeded) {
		t.Errorf("decodeEvent of %d bytes = %v, want zstd.ErrDecoderSizeExceeded", MaxDataSize+1, err)
	}
}

func TestEncodeTooLarge(t *testing.T) {
	// The data is never touched, so its pages are never allocated.
	e := Event{Seq: 5, Kind: KindFrame, Data: make([]byte, MaxDataSize+1)}
	if _, err := encodeEvent(&e); err == nil {
		t.Errorf("encodeEvent of %d bytes succeeded", len(e.Data))
	}

	var log errorLog
	s := openTestStoreOptions(t, &Options{OnError: log.add})
	w := mustCreate(t, s, Recording{Name: "big"})
	w.Append(Event{Kind: KindFrame, Data: []byte("fine")})
	w.Append(e)
	err := w.Finish()
	if err == nil || !bytes.Contains([]byte(err.Error()), []byte(fmt.Sprint(MaxDataSize))) {
		t.Errorf("Finish after appending %d bytes = %v, want the limit", len(e.Data), err)
	}
	if got := log.get(); len(got) != 1 || got[0] != err {
		t.Errorf("OnError got %v, want once %v", got, err)
	}
}
