package main

import (
	"bytes"
	"encoding/json"

	"github.com/klauspost/compress/zstd"
)

var zstdMagic = []byte{0x28, 0xb5, 0x2f, 0xfd}

// zstdAnywhere decompresses every zstd frame that starts somewhere in v
// (store values carry a small plain header before their compressed part).
func zstdAnywhere(v []byte) []byte {
	dec, err := zstd.NewReader(nil, zstd.WithDecoderMaxMemory(512<<20))
	if err != nil {
		return nil
	}
	defer dec.Close()
	var out bytes.Buffer
	for i := 0; ; {
		j := bytes.Index(v[i:], zstdMagic)
		if j < 0 {
			return out.Bytes()
		}
		if d, err := dec.DecodeAll(v[i+j:], nil); err == nil {
			out.Write(d)
		}
		i += j + 1
	}
}

func jsonUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }
