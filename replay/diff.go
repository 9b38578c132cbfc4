package replay

import (
	"fmt"
	"strings"
)

// unifiedDiff returns a unified diff of two texts, line by line, with
// context lines around each change; "" when they are equal. It uses the
// longest common subsequence, which is fine at the size of an agent's
// normalized transcript (thousands of lines); past maxLCS cells it falls
// back to showing the differing middle whole.
func unifiedDiff(aName, bName, a, b string, context int) string {
	if a == b {
		return ""
	}
	al, bl := splitLines(a), splitLines(b)
	// Trim the common head and tail so the LCS runs on the middle only.
	pre := 0
	for pre < len(al) && pre < len(bl) && al[pre] == bl[pre] {
		pre++
	}
	suf := 0
	for suf < len(al)-pre && suf < len(bl)-pre && al[len(al)-1-suf] == bl[len(bl)-1-suf] {
		suf++
	}
	ops := make([]diffOp, 0, len(al)+len(bl))
	for i := 0; i < pre; i++ {
		ops = append(ops, diffOp{' ', al[i]})
	}
	ops = append(ops, lcsOps(al[pre:len(al)-suf], bl[pre:len(bl)-suf])...)
	for i := len(al) - suf; i < len(al); i++ {
		ops = append(ops, diffOp{' ', al[i]})
	}

	var out strings.Builder
	fmt.Fprintf(&out, "--- %s\n+++ %s\n", aName, bName)
	// Emit hunks: runs of changes with up to context equal lines around.
	aLine, bLine := 1, 1
	for i := 0; i < len(ops); {
		if ops[i].kind == ' ' {
			i++
			aLine++
			bLine++
			continue
		}
		start := max(i-context, 0)
		for j := start; j < i; j++ {
			aLine--
			bLine--
		}
		end := i
		for end < len(ops) {
			if ops[end].kind != ' ' {
				end++
				continue
			}
			run := 0
			for end+run < len(ops) && ops[end+run].kind == ' ' {
				run++
			}
			if end+run == len(ops) || run > 2*context {
				end += min(run, context)
				break
			}
			end += run
		}
		var aCount, bCount int
		for _, op := range ops[start:end] {
			if op.kind != '+' {
				aCount++
			}
			if op.kind != '-' {
				bCount++
			}
		}
		// As in diff(1), an empty side names the line before the hunk.
		aStart, bStart := aLine, bLine
		if aCount == 0 {
			aStart--
		}
		if bCount == 0 {
			bStart--
		}
		fmt.Fprintf(&out, "@@ -%d,%d +%d,%d @@\n", aStart, aCount, bStart, bCount)
		for _, op := range ops[start:end] {
			out.WriteByte(op.kind)
			out.WriteString(op.line)
			out.WriteByte('\n')
		}
		aLine += aCount
		bLine += bCount
		i = end
	}
	return out.String()
}

type diffOp struct {
	kind byte // ' ', '-' or '+'
	line string
}

// maxLCS bounds the LCS table (cells) so that a huge divergence costs
// memory proportional to the output, not its square.
const maxLCS = 16 << 20

func lcsOps(a, b []string) []diffOp {
	var ops []diffOp
	if len(a)*len(b) > maxLCS {
		for _, l := range a {
			ops = append(ops, diffOp{'-', l})
		}
		for _, l := range b {
			ops = append(ops, diffOp{'+', l})
		}
		return ops
	}
	// lens[i][j] is the LCS length of a[i:] and b[j:].
	w := len(b) + 1
	lens := make([]int32, (len(a)+1)*w)
	for i := len(a) - 1; i >= 0; i-- {
		for j := len(b) - 1; j >= 0; j-- {
			if a[i] == b[j] {
				lens[i*w+j] = lens[(i+1)*w+j+1] + 1
			} else {
				lens[i*w+j] = max(lens[(i+1)*w+j], lens[i*w+j+1])
			}
		}
	}
	i, j := 0, 0
	for i < len(a) && j < len(b) {
		switch {
		case a[i] == b[j]:
			ops = append(ops, diffOp{' ', a[i]})
			i++
			j++
		case lens[(i+1)*w+j] >= lens[i*w+j+1]:
			ops = append(ops, diffOp{'-', a[i]})
			i++
		default:
			ops = append(ops, diffOp{'+', b[j]})
			j++
		}
	}
	for ; i < len(a); i++ {
		ops = append(ops, diffOp{'-', a[i]})
	}
	for ; j < len(b); j++ {
		ops = append(ops, diffOp{'+', b[j]})
	}
	return ops
}

func splitLines(s string) []string {
	s = strings.TrimSuffix(s, "\n")
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}
