package acptaptest_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/acptap/acptap/acptaptest"
)

// Check replays recordings without a testing.T and returns their reports:
// here a session of the demo agent, recorded against the demo LLM, replayed
// offline. In a test, acptaptest.Replay(t, path, opts) does the same with
// one subtest per recording.
func ExampleCheck() {
	dir, err := os.MkdirTemp("", "acptaptest-example-")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)
	db := filepath.Join(dir, "acptap.db")
	if err := record1(db, "fix-typo", true, "--title-call"); err != nil {
		fmt.Println(err)
		return
	}

	reports, err := acptaptest.Check(context.Background(), db, &acptaptest.Options{
		// The demo agent is this test binary: replay runs it with the
		// environment that makes it the agent.
		Replay: replayOptions(),
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, r := range reports {
		fmt.Println(r.Name, r.Outcome)
	}
	// Output: fix-typo PASS
}
