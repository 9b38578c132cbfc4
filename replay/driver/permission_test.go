package driver_test

import (
	"encoding/json"
	"errors"
	"reflect"
	"testing"

	"github.com/acptap/acptap/internal/acp"
	"github.com/acptap/acptap/internal/testing/testeditor"
	"github.com/acptap/acptap/lane"
	"github.com/acptap/acptap/replay/driver"
)

// TestReplayPermissionByKind: a recorded permission answer is replayed by
// the kind of the option it chose, so an agent that renamed or reordered
// its options still gets the editor's choice; one that no longer offers
// that kind gets "cancelled" and a *PermissionKindError naming the kind.
func TestReplayPermissionByKind(t *testing.T) {
	ws := workspace(t)
	allowed, _ := record(t, testeditor.Options{Cwd: ws, Prompts: []string{"one"}}, "--read", "notes.txt")
	rejected, _ := record(t, testeditor.Options{Cwd: ws, Prompts: []string{"one"}, Reject: true}, "--read", "notes.txt")
	for _, tc := range []struct {
		name    string
		frames  []lane.Line
		options string // --permission-options of the live agent; "" for the recorded ones
		want    map[string]string
		err     *driver.PermissionKindError
	}{
		{"as recorded", allowed, "", map[string]string{"outcome": "selected", "optionId": "allow"}, nil},
		{"renamed and reordered", allowed, "reject_once=no,allow_once=yes", map[string]string{"outcome": "selected", "optionId": "yes"}, nil},
		{"rejected, renamed", rejected, "allow_once=yes,reject_once=no", map[string]string{"outcome": "selected", "optionId": "no"}, nil},
		{"kind gone", allowed, "reject_once=no,reject_always=never", map[string]string{"outcome": "cancelled"},
			&driver.PermissionKindError{N: 1, Kind: "allow_once", Offered: []string{"reject_once", "reject_always"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := []string{"--read", "notes.txt"}
			if tc.options != "" {
				args = append(args, "--permission-options", tc.options)
			}
			d := driver.New(driver.Options{Recorded: tc.frames, PathMap: map[string]string{ws: ws}})
			res, err := replay(t, d, agentEnviron(), args...)
			var pe *driver.PermissionKindError
			switch {
			case tc.err == nil && err != nil:
				t.Fatalf("Run error = %v, want none", err)
			case tc.err != nil && (!errors.As(err, &pe) || !reflect.DeepEqual(*pe, *tc.err)):
				t.Fatalf("Run error = %v, want the *PermissionKindError %+v", err, *tc.err)
			}
			if got := permissionAnswer(t, res); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("the agent's permission request was answered %v, want %v", got, tc.want)
			}
		})
	}
}

// permissionAnswer returns the outcome of the answer Run sent to the
// agent's one permission request.
func permissionAnswer(t *testing.T, res driver.Result) map[string]string {
	t.Helper()
	var id string
	for _, l := range res.Live {
		if m := acp.Parse(l); m.Kind == acp.Request && m.Method == "session/request_permission" {
			id = acp.IDKey(m.ID)
		}
	}
	for _, l := range res.Sent {
		if m := acp.Parse(l); m.Kind == acp.Response && id != "" && acp.IDKey(m.ID) == id {
			var r struct {
				Outcome map[string]string `json:"outcome"`
			}
			if err := json.Unmarshal(m.Result, &r); err != nil {
				t.Fatal(err)
			}
			return r.Outcome
		}
	}
	t.Fatalf("no answer to a permission request among the lines sent")
	return nil
}
