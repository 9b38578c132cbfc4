package mcprelay

import (
	"bufio"
	"bytes"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/acptap/acptap/internal/stamp"
	"github.com/acptap/acptap/lane"
)

func TestRecordRoundTrip(t *testing.T) {
	in := []Record{
		{Dir: lane.ToServer, Stamp: 7, Data: []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)},
		{Dir: lane.FromServer, Continued: true, Stamp: 8, Data: []byte("half")},
		{Dir: lane.ServerStderr, NoNewline: true, Stamp: 1 << 60, Data: nil},
	}
	var b []byte
	for _, r := range in {
		b = appendRecord(b, r)
	}
	rd := bytes.NewReader(b)
	for i, want := range in {
		got, err := ReadRecord(rd)
		if err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
		if got.Dir != want.Dir || got.Continued != want.Continued || got.NoNewline != want.NoNewline || got.Stamp != want.Stamp || !bytes.Equal(got.Data, want.Data) {
			t.Errorf("record %d: got %+v, want %+v", i, got, want)
		}
	}
	if _, err := ReadRecord(rd); err == nil {
		t.Error("a record after the last")
	}
}

func TestReadRecordRefuses(t *testing.T) {
	bad := appendRecord(nil, Record{Dir: lane.ToServer, Data: []byte("x")})
	bad[0] = 9
	if _, err := ReadRecord(bytes.NewReader(bad)); err == nil || !strings.Contains(err.Error(), "stream 9") {
		t.Errorf("a record of stream 9: %v", err)
	}
	huge := appendRecord(nil, Record{Dir: lane.ToServer})
	huge[10], huge[11] = 0x7f, 0xff
	if _, err := ReadRecord(bytes.NewReader(huge)); err == nil || !strings.Contains(err.Error(), "more than") {
		t.Errorf("a record of 2 GiB: %v", err)
	}
	if _, err := ReadRecord(bytes.NewReader(appendRecord(nil, Record{Data: []byte("cut")})[:15])); err == nil {
		t.Error("a cut record read")
	}
}

func TestReadHello(t *testing.T) {
	for _, tc := range []struct {
		line string
		want int
		ok   bool
	}{
		{hello + "3\n", 3, true},
		{hello + "-1\n", 0, false},
		{hello + "80\n", 0, false},
		{"GET / HTTP/1.1\n", 0, false},
		{hello + "3", 0, false},
	} {
		got, err := ReadHello(bufio.NewReader(strings.NewReader(tc.line)))
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("ReadHello(%q) = %d, %v; want %d, ok %v", tc.line, got, err, tc.want, tc.ok)
		}
	}
}

// TestPumpReportsLines: what passes is what came, and each line is
// reported once whole, in pieces past MaxPiece, a last one without its
// newline flagged so.
func TestPumpReportsLines(t *testing.T) {
	var reports bytes.Buffer
	r := &reporter{conn: writerConn{&reports}, clock: stamp.NewClock()}
	long := strings.Repeat("y", MaxPiece+5)
	in := "one\n" + long + "\nlast"
	var out bytes.Buffer
	r.pump(lane.FromServer, strings.NewReader(in), &out)
	if out.String() != in {
		t.Errorf("passed %d bytes, want the %d that came", out.Len(), len(in))
	}
	var got []string
	rd := bytes.NewReader(reports.Bytes())
	for {
		rec, err := ReadRecord(rd)
		if err != nil {
			break
		}
		got = append(got, string(rec.Data[:min(3, len(rec.Data))])+"/"+map[bool]string{true: "c", false: ""}[rec.Continued]+map[bool]string{true: "n", false: ""}[rec.NoNewline])
	}
	if want := []string{"one/", "yyy/c", "yyy/", "las/n"}; strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("reported %q, want %q", got, want)
	}
}

func TestMainUsage(t *testing.T) {
	var stderr bytes.Buffer
	if code := Main([]string{"sock", "0", "cmd"}, strings.NewReader(""), &bytes.Buffer{}, &stderr); code != 2 || !strings.Contains(stderr.String(), "usage: acptap __mcp-relay SOCKET INDEX -- COMMAND") {
		t.Errorf("Main without --: exit %d, %q", code, stderr.String())
	}
	stderr.Reset()
	code := Main([]string{"/nonexistent/sock", "0", "--", "no-such-mcp-server"}, strings.NewReader(""), &bytes.Buffer{}, &stderr)
	if code != 127 || !strings.Contains(stderr.String(), "runs unrecorded") || !strings.Contains(stderr.String(), "no-such-mcp-server") {
		t.Errorf("Main without a recorder nor a server: exit %d, %q", code, stderr.String())
	}
}

func FuzzReadRecord(f *testing.F) {
	f.Add(appendRecord(nil, Record{Dir: lane.FromServer, Stamp: 3, Data: []byte(`{"id":1}`)}))
	f.Add([]byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1})
	f.Fuzz(func(t *testing.T, b []byte) {
		rec, err := ReadRecord(bytes.NewReader(b))
		if err != nil {
			return
		}
		// What is read writes back to a record that reads the same.
		again, err := ReadRecord(bytes.NewReader(appendRecord(nil, rec)))
		if err != nil || again.Dir != rec.Dir || again.Continued != rec.Continued || again.NoNewline != rec.NoNewline || again.Stamp != rec.Stamp || !bytes.Equal(again.Data, rec.Data) {
			t.Errorf("record %+v reads back as %+v, %v", rec, again, err)
		}
	})
}

// writerConn is a net.Conn that only writes, into a buffer.
type writerConn struct{ w *bytes.Buffer }

func (c writerConn) Write(b []byte) (int, error)      { return c.w.Write(b) }
func (c writerConn) Read([]byte) (int, error)         { return 0, nil }
func (c writerConn) Close() error                     { return nil }
func (c writerConn) LocalAddr() net.Addr              { return nil }
func (c writerConn) RemoteAddr() net.Addr             { return nil }
func (c writerConn) SetDeadline(time.Time) error      { return nil }
func (c writerConn) SetReadDeadline(time.Time) error  { return nil }
func (c writerConn) SetWriteDeadline(time.Time) error { return nil }
