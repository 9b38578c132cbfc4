package replay

import (
	"bytes"
	"strings"
	"testing"

	"github.com/acptap/acptap/lane"

	"github.com/acptap/acptap/internal/redact"
)

// TestReplayComparesMasked: a recording made before frames were masked by
// member names has an agent that puts its variable named like a key in
// initialize's _meta (by name: {"SERVICE_TOKEN": value}) and echoes it in
// its answer. Replayed with another
// value of the variable, it passes: both sides are compared masked, the
// live agent's lines as they are read and the recorded ones as they are
// loaded; and the agent's stderr that replay prints is masked too.
func TestReplayComparesMasked(t *testing.T) {
	st := openStore(t)
	t.Setenv("SERVICE_TOKEN", "svc-recorded-0123456789")
	// Recorded as acptap did before it masked members: the values of the
	// agent's secret variables only.
	recorder := redact.New([]string{"SERVICE_TOKEN=svc-recorded-0123456789"})
	recordSession(t, st, "old", session{args: []string{"--echo-env", "SERVICE_TOKEN", "--stderr-log"}, mask: recorder.Bytes})
	rec, err := load(st, "old")
	if err != nil {
		t.Fatal(err)
	}
	var frames bytes.Buffer
	for i := range rec.frames.Len() {
		f, err := rec.frames.Line(i)
		if err != nil {
			t.Fatal(err)
		}
		if f.Lane == lane.Agent {
			frames.Write(f.Data)
		}
	}
	rec.close()
	if !strings.Contains(frames.String(), `"_meta":{"environment":{"SERVICE_TOKEN":"[REDACTED]"}}`) || strings.Contains(frames.String(), "svc-recorded") {
		t.Fatalf("the recorded agent frames, loaded, are not masked by member name:\n%s", frames.String())
	}

	opts := runOptions(t)
	opts.Env = append(opts.Env, "SERVICE_TOKEN=svc-live-9876543210")
	var stderr bytes.Buffer
	opts.Stderr = &stderr
	res := replayIt(t, st, "old", opts)
	if !res.Equal() {
		t.Errorf("replay diverged: %v\n%s", res.Divergences, res.Diff)
	}
	for _, l := range res.Live {
		if bytes.Contains(l, []byte("svc-live")) {
			t.Errorf("a live line holds the variable's value: %s", l)
		}
	}
	if !strings.Contains(stderr.String(), "SERVICE_TOKEN=[REDACTED:SERVICE_TOKEN]") || strings.Contains(stderr.String(), "svc-live") {
		t.Errorf("the agent's stderr, printed, is not masked:\n%s", stderr.String())
	}
}
