package replay

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/acptap/acptap/lane"

	"github.com/acptap/acptap/internal/exchange"
	"github.com/acptap/acptap/store"
)

// appendExchange appends an LLM exchange of url to w, incomplete if asked.
func appendExchange(t *testing.T, w *store.Writer, url string, incomplete bool) {
	t.Helper()
	data, err := exchange.Marshal(chatExchange(url, nil, []byte(`{"model":"m"}`), []byte("data: [DONE]\n\n")))
	if err != nil {
		t.Fatal(err)
	}
	e := store.Event{Kind: store.KindExchange, Lane: store.LaneLLM, Data: data}
	if incomplete {
		e.Flags = store.FlagIncomplete
	}
	w.Append(e)
}

func TestLoad(t *testing.T) {
	st := openStore(t)
	w, err := st.Create(store.Recording{Name: "r", Argv: []string{"agent", "--acp"}, Cwd: "/rec"}, false)
	if err != nil {
		t.Fatal(err)
	}
	frame := func(lane store.Lane, data string, flags store.Flag) {
		w.Append(store.Event{Kind: store.KindFrame, Lane: lane, Flags: flags, Data: []byte(data)})
	}
	frame(store.LaneEditor, `{"id":0,`, store.FlagContinued)
	frame(store.LaneAgent, `{"id":0,"result":{}}`, 0)
	frame(store.LaneEditor, `"method":"initialize"}`, 0) // the end of the editor's line in pieces
	frame(store.LaneStderr, "agent: starting", 0)
	appendExchange(t, w, "https://api.example/v1/a", true) // in flight when recording stopped
	appendExchange(t, w, "https://api.example/v1/b", false)
	frame(store.LaneAgent, "not JSON", 0)
	appendExchange(t, w, "https://api.example/v1/c", false)
	if err := w.Finish(); err != nil {
		t.Fatal(err)
	}

	rec, err := load(st, "r")
	if err != nil {
		t.Fatal(err)
	}
	defer rec.close()
	if !slices.Equal(rec.meta.Argv, []string{"agent", "--acp"}) || rec.meta.Cwd != "/rec" {
		t.Errorf("meta: argv %q, cwd %q", rec.meta.Argv, rec.meta.Cwd)
	}
	var frames []string
	recFrames := spooledFrames(t, rec)
	for _, f := range recFrames {
		frames = append(frames, f.Lane.String()+" "+string(f.Data))
	}
	// The editor's line is whole where its last piece was; stderr is not
	// played.
	wantFrames := []string{
		`agent {"id":0,"result":{}}`,
		`editor {"id":0,"method":"initialize"}`,
		`agent not JSON`,
	}
	if !slices.Equal(frames, wantFrames) {
		t.Errorf("frames:\ngot  %q\nwant %q", frames, wantFrames)
	}
	var compared []string
	lines := rec.acpLines()
	for i := range lines.Len() {
		f, err := lines.Line(i)
		if err != nil {
			t.Fatal(err)
		}
		compared = append(compared, f.Lane.String()+" "+string(f.Data))
	}
	if !slices.Equal(compared, frames) {
		t.Errorf("frames compared %q, want every frame, %q", compared, frames)
	}
	if rec.editors != 1 || !slices.Equal(rec.cwds, nil) {
		t.Errorf("%d editor frames, session cwds %q; want 1 and none", rec.editors, rec.cwds)
	}
	// Numbered as show numbers them: the incomplete exchange is not one.
	var exchanges []string
	for _, x := range rec.exchanges {
		exchanges = append(exchanges, x.Exchange.URL)
		if want := len(exchanges); x.Number != want {
			t.Errorf("exchange %s is number %d, want %d", x.Exchange.URL, x.Number, want)
		}
	}
	if want := []string{"https://api.example/v1/b", "https://api.example/v1/c"}; !slices.Equal(exchanges, want) {
		t.Errorf("exchanges %q, want %q", exchanges, want)
	}
	if rec.exchanges[0].Seq != 6 || rec.exchanges[1].Seq != 8 {
		t.Errorf("exchange seqs %d, %d; want their events', 6 and 8", rec.exchanges[0].Seq, rec.exchanges[1].Seq)
	}
}

func TestLoadErrors(t *testing.T) {
	st := openStore(t)
	w, err := st.Create(store.Recording{Name: "bad"}, false)
	if err != nil {
		t.Fatal(err)
	}
	w.Append(store.Event{Kind: store.KindFrame, Lane: store.LaneEditor, Data: []byte("{}")})
	w.Append(store.Event{Kind: store.KindExchange, Lane: store.LaneLLM, Data: []byte("not an exchange")})
	if err := w.Finish(); err != nil {
		t.Fatal(err)
	}
	if _, err := load(st, "bad"); err == nil || !strings.Contains(err.Error(), "llm #1 (event 2)") {
		t.Errorf("load of an undecodable exchange = %v, want an error naming llm #1 (event 2)", err)
	}
	if _, err := load(st, "nope"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("load of a missing recording = %v, want store.ErrNotFound", err)
	}
}

// spooledFrames returns the frames of rec's spool.
func spooledFrames(t *testing.T, rec *recording) []lane.Line {
	t.Helper()
	var frames []lane.Line
	for i := range rec.frames.Len() {
		f, err := rec.frames.Line(i)
		if err != nil {
			t.Fatal(err)
		}
		frames = append(frames, f)
	}
	return frames
}

func TestRecordingCommand(t *testing.T) {
	recorded := &recording{meta: store.Recording{Name: "r", Argv: []string{"agent", "--acp"}}}
	bare := &recording{meta: store.Recording{Name: "bare"}}
	for _, tc := range []struct {
		rec      *recording
		override []string
		want     []string
	}{
		{recorded, nil, []string{"agent", "--acp"}},
		{recorded, []string{"other"}, []string{"other"}},
		{bare, []string{"other"}, []string{"other"}},
	} {
		if got, err := tc.rec.command(tc.override); err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("command(%q) of %q = %q, %v; want %q", tc.override, tc.rec.meta.Argv, got, err, tc.want)
		}
	}
	_, err := bare.command(nil)
	if !errors.Is(err, ErrNoCommand) || err.Error() != `no agent command: recording "bare" has no agent command` {
		t.Errorf("command of a recording without one = %v, want ErrNoCommand naming the recording", err)
	}
}

func TestSessionCwds(t *testing.T) {
	frames := []lane.Line{
		{Lane: lane.Editor, Data: []byte(`{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/rec/a","mcpServers":[]}}`)},
		{Lane: lane.Agent, Data: []byte(`{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/agent/side"}}`)},
		{Lane: lane.Editor, Data: []byte(`{"jsonrpc":"2.0","id":2,"method":"session/load","params":{"cwd":"/rec/b","sessionId":"s"}}`)},
		{Lane: lane.Editor, Data: []byte(`{"jsonrpc":"2.0","id":3,"method":"session/new","params":{"cwd":"/rec/a"}}`)},
		{Lane: lane.Editor, Data: []byte(`{"jsonrpc":"2.0","id":4,"method":"session/new","params":{"cwd":"relative"}}`)},
		{Lane: lane.Editor, Data: []byte(`{"jsonrpc":"2.0","id":5,"method":"session/prompt","params":{"cwd":"/rec/c"}}`)},
	}
	var got []string
	for _, f := range frames {
		if f.Lane == lane.Editor {
			got = addSessionCwd(got, f.Data)
		}
	}
	if want := []string{"/rec/a", "/rec/b"}; !slices.Equal(got, want) {
		t.Errorf("session cwds = %q, want %q", got, want)
	}
}
