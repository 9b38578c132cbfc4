package stdiotap

import (
	"bytes"
	"io"
)

// MaxRewrite is the longest line Config.RewriteStdin is given: a longer
// one is forwarded as it comes, unchanged, rather than held whole.
const MaxRewrite = 16 << 20

// lineRewriter forwards what is written to w a whole line at a time,
// each line through rewrite. It is used by one goroutine.
type lineRewriter struct {
	w       io.Writer
	rewrite func([]byte) []byte
	line    []byte // the start of a line not yet forwarded
	out     []byte // a rewritten line and its newline
	through bool   // the current line is too long: forwarded as it comes
}

// Write forwards the whole lines of p, each rewritten, and holds the
// start of the next. It fails with w's first error.
func (r *lineRewriter) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if r.through {
			end := len(p)
			if i >= 0 {
				end = i + 1
				r.through = false
			}
			if _, err := r.w.Write(p[:end]); err != nil {
				return 0, err
			}
			p = p[end:]
			continue
		}
		if i < 0 {
			r.line = append(r.line, p...)
			if len(r.line) > MaxRewrite {
				r.through = true
				_, err := r.w.Write(r.line)
				r.line = r.line[:0]
				if err != nil {
					return 0, err
				}
			}
			return n, nil
		}
		var line []byte
		if len(r.line) > 0 {
			r.line = append(r.line, p[:i]...)
			line = r.line
		} else {
			line = p[:i]
		}
		rewritten := line
		if len(line) <= MaxRewrite {
			rewritten = r.rewrite(line)
		}
		// Copied: the rewritten line may be line itself, in the caller's
		// buffer.
		r.out = append(append(r.out[:0], rewritten...), '\n')
		r.line = r.line[:0]
		if _, err := r.w.Write(r.out); err != nil {
			return 0, err
		}
		p = p[i+1:]
	}
	return n, nil
}

// flush forwards a last line without a newline, rewritten.
func (r *lineRewriter) flush() {
	if len(r.line) > 0 && !r.through {
		if len(r.line) <= MaxRewrite {
			r.w.Write(r.rewrite(r.line))
		} else {
			r.w.Write(r.line)
		}
	}
	r.line = nil
}
