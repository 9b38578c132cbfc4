package record

import (
	"testing"
	"time"

	"github.com/acptap/acptap/stdiotap"
)

func TestBacklogNotice(t *testing.T) {
	for _, tc := range []struct {
		b      stdiotap.Backlog
		queued int
		want   string
	}{
		{stdiotap.Backlog{Behind: true, Bytes: 48 << 20, Max: 192 << 20}, 16<<20 + 1, "recording falls behind the agent's stdio: 65 MiB forwarded and not yet recorded; forwarding waits for it once that reaches 256 MiB"},
		{stdiotap.Backlog{Bytes: 192 << 20, Max: 192 << 20, Waited: 1234567 * time.Microsecond}, 0, "recording caught up with the agent's stdio (it fell up to 192 MiB behind; forwarding waited 1.235s for it)"},
		{stdiotap.Backlog{Bytes: 50 << 20, Max: 192 << 20}, 0, "recording caught up with the agent's stdio (it fell up to 50 MiB behind; forwarding never waited)"},
	} {
		if got := backlogNotice(tc.b, tc.queued, DefaultMaxBacklog); got != tc.want {
			t.Errorf("backlogNotice(%+v, %d):\ngot  %q\nwant %q", tc.b, tc.queued, got, tc.want)
		}
	}
}
