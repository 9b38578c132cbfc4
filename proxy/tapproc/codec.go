package tapproc

import (
	"encoding/binary"
	"errors"
	"net/http"
	"time"

	"github.com/acptap/acptap/internal/exchange"
)

// An exchange crosses the pipe in a binary form of its own rather than
// exchange.Marshal's JSON, which the store keeps: the tap process must
// spend as little as it can on what it sends, and JSON's base64 of the
// bodies, then the parent's decoding of it, were a tenth of the tap
// process's CPU and a quarter of the parent's on 1 KiB requests. Bodies
// are copied as they are; numbers are varints; every string, byte slice,
// header and chunk list is its length plus one, 0 standing for nil, so
// that the parent gets what the tap had, nil and empty apart. The fields
// go in the order of exchange.Exchange's.

// errCodec is decodeExchange's error for bytes that are not an exchange.
var errCodec = errors.New("malformed exchange")

// appendExchange appends x's encoding to b.
func appendExchange(b []byte, x *exchange.Exchange) []byte {
	b = appendString(b, x.Route)
	b = appendString(b, x.BaseURLVar)
	b = appendString(b, x.Method)
	b = appendString(b, x.URL)
	b = appendString(b, x.Proto)
	b = appendHeader(b, x.RequestHeaders)
	b = appendBytes(b, x.RequestBody)
	b = appendString(b, x.RequestEncoding)
	b = binary.AppendVarint(b, int64(x.Status))
	b = appendHeader(b, x.ResponseHeaders)
	b = appendString(b, x.ResponseEncoding)
	if x.Chunks == nil {
		b = binary.AppendUvarint(b, 0)
	} else {
		b = binary.AppendUvarint(b, uint64(len(x.Chunks))+1)
		for _, c := range x.Chunks {
			b = binary.AppendVarint(b, int64(c.At))
			b = appendBytes(b, c.Data)
			if c.Binary {
				b = append(b, 1)
			} else {
				b = append(b, 0)
			}
		}
	}
	b = binary.AppendVarint(b, int64(x.TTFB))
	b = binary.AppendVarint(b, int64(x.Duration))
	b = binary.AppendUvarint(b, uint64(x.End))
	return appendString(b, x.Error)
}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s))+1)
	return append(b, s...)
}

func appendBytes(b, p []byte) []byte {
	if p == nil {
		return binary.AppendUvarint(b, 0)
	}
	b = binary.AppendUvarint(b, uint64(len(p))+1)
	return append(b, p...)
}

func appendHeader(b []byte, h http.Header) []byte {
	if h == nil {
		return binary.AppendUvarint(b, 0)
	}
	b = binary.AppendUvarint(b, uint64(len(h))+1)
	for k, vv := range h {
		b = appendString(b, k)
		if vv == nil {
			b = binary.AppendUvarint(b, 0)
			continue
		}
		b = binary.AppendUvarint(b, uint64(len(vv))+1)
		for _, v := range vv {
			b = appendString(b, v)
		}
	}
	return b
}

// decoder reads an encoding; its byte slices share data.
type decoder struct {
	data []byte
	bad  bool // data ran out or held a length past its end
}

// decodeExchange decodes what appendExchange wrote. The exchange's bodies
// share data.
func decodeExchange(data []byte) (*exchange.Exchange, error) {
	d := &decoder{data: data}
	x := &exchange.Exchange{
		Route:      d.string(),
		BaseURLVar: d.string(),
		Method:     d.string(),
		URL:        d.string(),
		Proto:      d.string(),
	}
	x.RequestHeaders = d.header()
	x.RequestBody = d.bytes()
	x.RequestEncoding = d.string()
	x.Status = int(d.varint())
	x.ResponseHeaders = d.header()
	x.ResponseEncoding = d.string()
	if n, ok := d.count(); ok && n > 0 {
		x.Chunks = make([]exchange.Chunk, n-1)
		for i := range x.Chunks {
			x.Chunks[i] = exchange.Chunk{At: time.Duration(d.varint()), Data: d.bytes(), Binary: d.uvarint() == 1}
		}
	}
	x.TTFB = time.Duration(d.varint())
	x.Duration = time.Duration(d.varint())
	x.End = exchange.End(d.uvarint())
	x.Error = d.string()
	if d.bad || len(d.data) > 0 {
		return nil, errCodec
	}
	return x, nil
}

func (d *decoder) uvarint() uint64 {
	v, n := binary.Uvarint(d.data)
	if n <= 0 {
		d.bad, d.data = true, nil
		return 0
	}
	d.data = d.data[n:]
	return v
}

func (d *decoder) varint() int64 {
	v, n := binary.Varint(d.data)
	if n <= 0 {
		d.bad, d.data = true, nil
		return 0
	}
	d.data = d.data[n:]
	return v
}

// count reads a length plus one: the length n+1, or 0 for nil, and
// whether the bytes it counts, at least one each, can be there.
func (d *decoder) count() (uint64, bool) {
	n := d.uvarint()
	if n > uint64(len(d.data))+1 {
		d.bad, d.data = true, nil
		return 0, false
	}
	return n, !d.bad
}

func (d *decoder) bytes() []byte {
	n, ok := d.count()
	if !ok || n == 0 {
		return nil
	}
	p := d.data[: n-1 : n-1]
	d.data = d.data[n-1:]
	return p
}

func (d *decoder) string() string {
	if p := d.bytes(); p != nil {
		return string(p)
	}
	return ""
}

func (d *decoder) header() http.Header {
	n, ok := d.count()
	if !ok || n == 0 {
		return nil
	}
	h := make(http.Header, n-1)
	for range n - 1 {
		k := d.string()
		m, ok := d.count()
		if !ok {
			return nil
		}
		if m == 0 {
			h[k] = nil
			continue
		}
		vv := make([]string, m-1)
		for i := range vv {
			vv[i] = d.string()
		}
		h[k] = vv
	}
	return h
}
