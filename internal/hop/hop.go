// Package hop handles what belongs to one HTTP connection rather than to the exchange: the hop-by-hop headers, which neither the tap nor the replay server passes on, and the connection reset a replayed response asks of the tap.
package hop

import (
	"errors"
	"net/http"
	"net/textproto"
	"strings"
)

// ErrReset, wrapped in the error that a response body returns from Read,
// asks the HTTP tap to reset the agent's connection after the bytes read
// so far. The tap exports it as proxy.ErrReset, for Transports; the replay
// server uses it to inject resets.
var ErrReset = errors.New("connection reset requested")

// headers are the hop-by-hop headers of RFC 9110, section 7.6.1, and
// Proxy-Connection, which is not standard but sent by some clients.
var headers = []string{
	"Connection",
	"Proxy-Connection",
	"Keep-Alive",
	"Proxy-Authenticate",
	"Proxy-Authorization",
	"Te",
	"Trailer",
	"Transfer-Encoding",
	"Upgrade",
}

// RemoveHeaders removes the hop-by-hop headers from h, and those that its
// Connection header names.
func RemoveHeaders(h http.Header) {
	for _, f := range h["Connection"] {
		for sf := range strings.SplitSeq(f, ",") {
			if sf = textproto.TrimString(sf); sf != "" {
				h.Del(sf)
			}
		}
	}
	for _, k := range headers {
		h.Del(k)
	}
}
