package main

import (
	"fmt"
	"io"
	"sync"
	"time"
)

// progress is the live line `replay` keeps on a terminal while recordings
// replay: how many are done of how many, the failures so far, and the
// running recording that has taken longest. Off a terminal it shows
// nothing; the reports, one per finished recording, are the progress.
type progress struct {
	w     io.Writer
	total int
	paint painter
	now   func() time.Time

	mu      sync.Mutex // guards the fields below, and the terminal's line
	done    int
	failed  int
	running map[string]time.Time // start times of the running replays
	shown   bool                 // the line is on the terminal
	stopped bool

	quit chan struct{} // closed by stop
	wg   sync.WaitGroup
}

// progressTick is how often the line is redrawn.
const progressTick = 200 * time.Millisecond

// newProgress returns the progress of total replays, drawn on w when on.
func newProgress(w io.Writer, total int, on bool, color bool) *progress {
	p := &progress{w: w, total: total, paint: painter(color), now: time.Now, running: map[string]time.Time{}, quit: make(chan struct{})}
	if !on {
		p.stopped = true
		return p
	}
	p.wg.Go(func() {
		t := time.NewTicker(progressTick)
		defer t.Stop()
		for {
			select {
			case <-p.quit:
				return
			case <-t.C:
				p.mu.Lock()
				p.draw()
				p.mu.Unlock()
			}
		}
	})
	return p
}

// started notes that the replay of name began.
func (p *progress) started(name string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.running[name] = p.now()
}

// report notes that the replay of name ended, failed or not, and runs
// print (which writes its report) with the line off the terminal.
func (p *progress) report(name string, failed bool, print func()) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.running, name)
	p.done++
	if failed {
		p.failed++
	}
	p.erase()
	print()
	p.draw()
}

// stop takes the line off the terminal for good. It is idempotent.
func (p *progress) stop() {
	p.mu.Lock()
	if p.stopped {
		p.mu.Unlock()
		return
	}
	p.stopped = true
	p.erase()
	p.mu.Unlock()
	close(p.quit)
	p.wg.Wait()
}

// line is the progress line at now.
func (p *progress) line(now time.Time) string {
	s := fmt.Sprintf("replaying: %d/%d done", p.done, p.total)
	if p.failed > 0 {
		s += ", " + p.paint.paint(colorRed, fmt.Sprintf("%d failed", p.failed))
	}
	var slowest string
	var since time.Time
	for name, t := range p.running {
		if slowest == "" || t.Before(since) || t.Equal(since) && name < slowest {
			slowest, since = name, t
		}
	}
	if slowest != "" {
		s += fmt.Sprintf(" · slowest running: %s (%s)", slowest, now.Sub(since).Round(100*time.Millisecond))
	}
	return s
}

// draw puts the line on the terminal, replacing what it showed.
func (p *progress) draw() {
	if p.stopped {
		return
	}
	fmt.Fprintf(p.w, "\r\x1b[K%s", p.line(p.now()))
	p.shown = true
}

// erase takes the line off the terminal.
func (p *progress) erase() {
	if p.shown {
		fmt.Fprint(p.w, "\r\x1b[K")
		p.shown = false
	}
}
