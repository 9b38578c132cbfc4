package testagent

import (
	"fmt"
	"strings"
	"sync"
	"time"
)

// --concurrent-updates makes the agent send three updates from concurrent
// tasks, as real agents do, each racing something else on stdout:
//
//   - an available_commands_update, racing the session/new answer (and
//     the editor's first session/prompt, which follows that answer);
//   - the final tool_call_update of a tool call (status completed),
//     racing the message chunks that follow the tool call;
//   - a usage_update at the end of each turn, racing the session/prompt
//     answer.
//
// --racing limits the racing to some of them (commands, tool, usage); the
// others are sent early. A tool call also gets an in_progress update once
// it may run. Where the racing updates land is up to the order: timed sends each from a goroutine,
// the tool's update ~15 ms late, so that scheduling decides; late puts each
// after what it races, early before, every time. Whatever the order, each
// lands within its turn or right after its answer: a turn's answer waits
// for the updates racing the turn's output, and a turn's first output for
// the usage racing the previous answer.

// raceOrder is the order of --concurrent-updates.
type raceOrder uint8

const (
	raceOff   raceOrder = iota // no concurrent updates
	raceTimed                  // sent from goroutines: scheduling decides
	raceLate                   // after what they race
	raceEarly                  // before what they race
)

// What races: --racing names some of these.
type racing struct{ commands, tool, usage bool }

func parseRacing(s string) (racing, error) {
	var r racing
	for name := range strings.SplitSeq(s, ",") {
		switch strings.TrimSpace(name) {
		case "commands":
			r.commands = true
		case "tool":
			r.tool = true
		case "usage":
			r.usage = true
		default:
			return racing{}, fmt.Errorf("--racing %q: want a comma-separated list of commands, tool and usage", s)
		}
	}
	return r, nil
}

// order returns the order of the updates of one kind: the agent's, or
// for updates that do not race, early (where they would be without
// concurrent tasks).
func (a *agent) order(races bool) raceOrder {
	if a.cfg.race != raceOff && !races {
		return raceEarly
	}
	return a.cfg.race
}

// lateBy is how late a timed tool update is sent.
const lateBy = 15 * time.Millisecond

func parseRaceOrder(s string) (raceOrder, error) {
	switch s {
	case "timed":
		return raceTimed, nil
	case "late":
		return raceLate, nil
	case "early":
		return raceEarly, nil
	}
	return raceOff, fmt.Errorf("--concurrent-updates %q: want timed, late or early", s)
}

// A plant is a change of behaviour that a replay must catch, planted on
// purpose by --plant.
type plant uint8

const (
	plantNone          plant = iota
	plantSwapChunks          // the answer's first two chunks swapped (scripted mode)
	plantProgressLast        // a tool call's in_progress update after its completed one
	plantStatusFailed        // a tool call's final update with status failed instead of completed
	plantSecondSession       // the second session's answers worded otherwise (scripted mode)
	plantHistoryDrop         // session/load's history lacks the last answer
	plantModeIgnored         // the session's mode does not change the answer or the prompt
)

var plantNames = map[string]plant{
	"swap-chunks":    plantSwapChunks,
	"progress-last":  plantProgressLast,
	"status-failed":  plantStatusFailed,
	"second-session": plantSecondSession,
	"history-drop":   plantHistoryDrop,
	"mode-ignored":   plantModeIgnored,
}

func parsePlant(s string) (plant, error) {
	if p, ok := plantNames[s]; ok {
		return p, nil
	}
	return plantNone, fmt.Errorf("--plant %q: want swap-chunks, progress-last, status-failed, second-session, history-drop or mode-ignored", s)
}

// raceState is a session's state of --concurrent-updates.
type raceState struct {
	// racers are the updates racing the running turn's output, which its
	// answer waits for; after is the usage update racing the last answer,
	// which the next turn's output waits for.
	racers, after sync.WaitGroup
	// late are the tool updates held back, in the late order, until the
	// next message chunks have been sent. Only the running turn uses it.
	late []toolCallUpdate
	// used is the context the usage updates report. Only the running
	// turn uses it.
	used int
}

// background runs f in a goroutine that the agent waits for before it
// exits, unless it is stopping on a signal: then it does not wait.
func (a *agent) background(f func()) {
	a.mu.Lock()
	tracked := !a.stopping
	if tracked {
		a.turns.Add(1)
	}
	a.mu.Unlock()
	go func() {
		if tracked {
			defer a.turns.Done()
		}
		f()
	}()
}

// answerSessionNew sends the session/new answer with reply and, under
// --concurrent-updates, the available_commands_update racing it.
func (a *agent) answerSessionNew(s *session, reply func()) {
	commands := func() {
		a.update(s, map[string]any{
			"sessionUpdate": "available_commands_update",
			"availableCommands": []map[string]any{
				{"name": "review", "description": "Review the changes in the workspace", "input": nil},
			},
		})
	}
	switch a.order(a.cfg.racing.commands) {
	case raceOff:
		reply()
	case raceEarly:
		commands()
		reply()
	case raceLate:
		reply()
		commands()
	case raceTimed:
		s.race.racers.Add(1)
		a.background(func() {
			defer s.race.racers.Done()
			commands()
		})
		reply()
	}
}

// startTurn waits, under --concurrent-updates, for the usage update racing
// the previous answer, and counts the prompt's context.
func (a *agent) startTurn(s *session, prompt string) {
	if a.cfg.race == raceOff {
		return
	}
	s.race.after.Wait()
	s.race.used += 100 + len(prompt)
}

// toolProgress sends a tool call's in_progress update, under
// --concurrent-updates, unless planted elsewhere.
func (a *agent) toolProgress(s *session, callID string) {
	if a.cfg.race == raceOff || a.cfg.plant == plantProgressLast {
		return
	}
	a.update(s, progressUpdate(callID))
}

func progressUpdate(callID string) toolCallUpdate {
	return toolCallUpdate{SessionUpdate: "tool_call_update", ToolCallID: callID, Status: "in_progress", Content: textContent("reading")}
}

// toolDone sends a tool call's final update u, racing the message chunks
// that follow under --concurrent-updates.
func (a *agent) toolDone(s *session, u toolCallUpdate) {
	if a.skipsToolDone() {
		return
	}
	if a.cfg.plant == plantStatusFailed {
		u.Status = "failed"
	}
	send := func() {
		a.update(s, u)
		if a.cfg.plant == plantProgressLast {
			a.update(s, progressUpdate(u.ToolCallID))
		}
	}
	switch a.order(a.cfg.racing.tool) {
	case raceOff, raceEarly:
		send()
	case raceLate:
		s.race.late = append(s.race.late, u)
	case raceTimed:
		s.race.racers.Add(1)
		a.background(func() {
			defer s.race.racers.Done()
			time.Sleep(lateBy)
			send()
		})
	}
}

// chunksSent sends, in the late order of --concurrent-updates, the tool
// updates held back until the message chunks that followed them.
func (a *agent) chunksSent(s *session) {
	late := s.race.late
	s.race.late = nil
	for _, u := range late {
		a.update(s, u)
		if a.cfg.plant == plantProgressLast {
			a.update(s, progressUpdate(u.ToolCallID))
		}
	}
}

// answerPrompt sends a turn's answer with reply once the updates racing
// the turn's output have been sent, and, under --concurrent-updates, the
// usage update racing the answer.
func (a *agent) answerPrompt(s *session, reply func()) {
	if a.cfg.race == raceOff {
		reply()
		return
	}
	a.chunksSent(s)
	s.race.racers.Wait()
	used := s.race.used
	usage := func() {
		a.update(s, map[string]any{"sessionUpdate": "usage_update", "used": used, "size": 200000})
	}
	switch a.order(a.cfg.racing.usage) {
	case raceEarly:
		usage()
		reply()
	case raceLate:
		s.race.after.Add(1)
		reply()
		usage()
		s.race.after.Done()
	case raceTimed:
		s.race.after.Add(1)
		a.background(func() {
			defer s.race.after.Done()
			usage()
		})
		reply()
	}
}

// answerChunks returns the chunks of a scripted answer as --plant wants
// them sent.
func (a *agent) answerChunks(cs []string) []string {
	if a.cfg.plant == plantSwapChunks && len(cs) >= 2 {
		cs[0], cs[1] = cs[1], cs[0]
	}
	return cs
}

// plantUsage is the usage of --plant.
var plantUsage = "behave differently in one way, for tests that a replay catches it: `CHANGE` " + strings.Join([]string{
	"swap-chunks (the answer's first two chunks swapped, scripted mode)",
	"progress-last (a tool call's in_progress update after its completed one)",
	"status-failed (a tool call's final update says failed)",
	"second-session (the second session's answers are worded otherwise, scripted mode)",
	"history-drop (session/load's history lacks the last answer)",
	"mode-ignored (the session's mode changes nothing)",
}, ", ")
