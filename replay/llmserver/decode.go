package llmserver

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/acptap/acptap/internal/httpcoding"
)

// maxDecoded bounds a decoded request body, against a compression bomb.
const maxDecoded = 256 << 20

// decodeRequestBody undoes the Content-Encoding of h on a request body,
// as the recording did: gzip, deflate (zlib, or raw as some clients send
// it), zstd and br, last applied first. It returns the decoded body and the
// encoding undone ("" for none).
func decodeRequestBody(h http.Header, body []byte) (decoded []byte, encoding string, err error) {
	sent, codings := httpcoding.Parse(h)
	if len(codings) == 0 || len(body) == 0 {
		return body, "", nil
	}
	out, err := httpcoding.Decode(body, codings, maxDecoded)
	if err != nil {
		return body, "", fmt.Errorf("decoding the %s request body: %w", strings.Join(codings, ", "), err)
	}
	return out, sent, nil
}
