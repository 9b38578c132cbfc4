package llmserver

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/andybalholm/brotli"
	"github.com/klauspost/compress/flate"
	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zlib"
	"github.com/klauspost/compress/zstd"
)

// maxDecoded bounds a decoded request body, against a compression bomb.
const maxDecoded = 256 << 20

// decodeRequestBody undoes the Content-Encoding of h on a request body,
// as the recording did: gzip, deflate (zlib, or raw as some clients send
// it), zstd and br, last applied first. It returns the decoded body and the
// encoding undone ("" for none).
func decodeRequestBody(h http.Header, body []byte) (decoded []byte, encoding string, err error) {
	vals := h.Values("Content-Encoding")
	var codings []string
	for _, v := range vals {
		for c := range strings.SplitSeq(v, ",") {
			if c = strings.ToLower(strings.TrimSpace(c)); c != "" && c != "identity" {
				codings = append(codings, c)
			}
		}
	}
	if len(codings) == 0 || len(body) == 0 {
		return body, "", nil
	}
	out := body
	for i := len(codings) - 1; i >= 0; i-- {
		if out, err = decodeOnce(codings[i], out); err != nil {
			return body, "", fmt.Errorf("decoding the %s request body: %w", codings[i], err)
		}
	}
	return out, strings.Join(vals, ", "), nil
}

// decodeOnce undoes one content coding.
func decodeOnce(coding string, in []byte) ([]byte, error) {
	var r io.Reader
	switch coding {
	case "gzip", "x-gzip":
		zr, err := gzip.NewReader(bytes.NewReader(in))
		if err != nil {
			return nil, err
		}
		r = zr
	case "deflate":
		if len(in) >= 2 && in[0]&0x0f == 8 && (uint16(in[0])<<8|uint16(in[1]))%31 == 0 {
			zr, err := zlib.NewReader(bytes.NewReader(in))
			if err != nil {
				return nil, err
			}
			r = zr
		} else {
			r = flate.NewReader(bytes.NewReader(in))
		}
	case "zstd":
		d, err := zstd.NewReader(bytes.NewReader(in), zstd.WithDecoderConcurrency(1))
		if err != nil {
			return nil, err
		}
		defer d.Close()
		r = d
	case "br":
		r = brotli.NewReader(bytes.NewReader(in))
	default:
		return nil, fmt.Errorf("unsupported content coding %q", coding)
	}
	out, err := io.ReadAll(io.LimitReader(r, maxDecoded+1))
	if err != nil {
		return nil, err
	}
	if len(out) > maxDecoded {
		return nil, fmt.Errorf("more than %d bytes decoded", maxDecoded)
	}
	return out, nil
}
