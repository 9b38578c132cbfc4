package record

import (
	"testing"
	"time"

	"github.com/acptap/acptap/stdiotap"
)

func TestBacklogNotice(t *testing.T) {
	for _, tc := range []struct {
		b    stdiotap.Backlog
		want string
	}{
		{stdiotap.Backlog{Behind: true, Bytes: 32<<20 + 1, Max: 128 << 20}, "recording falls behind the agent's stdio by 33 MiB; forwarding will wait for it if that reaches 128 MiB"},
		{stdiotap.Backlog{Bytes: 128 << 20, Max: 128 << 20, Waited: 1234567 * time.Microsecond}, "recording caught up with the agent's stdio (it fell up to 128 MiB behind; forwarding waited 1.235s for it)"},
		{stdiotap.Backlog{Bytes: 50 << 20, Max: 128 << 20}, "recording caught up with the agent's stdio (it fell up to 50 MiB behind; forwarding never waited)"},
		// --max-backlog 1MiB: its stdio half is 512 KiB, not "1 MiB".
		{stdiotap.Backlog{Behind: true, Bytes: 128 << 10, Max: 512 << 10}, "recording falls behind the agent's stdio by 128 KiB; forwarding will wait for it if that reaches 512 KiB"},
		{stdiotap.Backlog{Bytes: 300<<10 + 1, Max: 512 << 10}, "recording caught up with the agent's stdio (it fell up to 301 KiB behind; forwarding never waited)"},
	} {
		if got := backlogNotice(tc.b); got != tc.want {
			t.Errorf("backlogNotice(%+v):\ngot  %q\nwant %q", tc.b, got, tc.want)
		}
	}
}
