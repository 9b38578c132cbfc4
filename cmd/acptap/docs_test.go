package main

import (
	"bufio"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// The repository's root, from this package's directory.
const repoRoot = "../.."

// TestREADMEIsShort holds README.md to what a newcomer reads in five
// minutes (issue 25): under 300 lines, with the two set-up-free commands
// as they are.
func TestREADMEIsShort(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(repoRoot, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	readme := string(data)
	if n := strings.Count(readme, "\n"); n >= 300 {
		t.Errorf("README.md has %d lines, want fewer than 300: move the detail to docs/", n)
	}
	for _, cmd := range []string{"    go run ./cmd/acptap demo\n", "    ./scripts/test\n"} {
		if !strings.Contains(readme, cmd) {
			t.Errorf("README.md lacks the command %q", strings.TrimSpace(cmd))
		}
	}
	// Every longer-run script stays findable from README.md.
	scripts, err := os.ReadDir(filepath.Join(repoRoot, "scripts"))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range scripts {
		if !strings.Contains(readme, "./scripts/"+s.Name()) {
			t.Errorf("README.md does not name ./scripts/%s", s.Name())
		}
	}
}

// TestDocsLinks checks every relative link of README.md and docs/*.md:
// the file it names exists and, for a #fragment, that file has a heading
// of that anchor (GitHub's slugs).
func TestDocsLinks(t *testing.T) {
	pages, err := filepath.Glob(filepath.Join(repoRoot, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	pages = append([]string{filepath.Join(repoRoot, "README.md")}, pages...)
	anchors := map[string]map[string]bool{} // a Markdown file → its anchors
	anchorsOf := func(path string) map[string]bool {
		if a, ok := anchors[path]; ok {
			return a
		}
		a := headingAnchors(t, path)
		anchors[path] = a
		return a
	}
	for _, page := range pages {
		rel, _ := filepath.Rel(repoRoot, page)
		for _, l := range markdownLinks(t, page) {
			target, frag, _ := strings.Cut(l.target, "#")
			path := page
			if target != "" {
				path = filepath.Join(filepath.Dir(page), filepath.FromSlash(target))
				if _, err := os.Stat(path); err != nil {
					t.Errorf("%s:%d: link %q: %v", rel, l.line, l.target, err)
					continue
				}
			}
			if frag == "" {
				continue
			}
			if !strings.HasSuffix(path, ".md") {
				t.Errorf("%s:%d: link %q: an anchor into a file that is not Markdown", rel, l.line, l.target)
				continue
			}
			if !anchorsOf(path)[frag] {
				t.Errorf("%s:%d: link %q: no heading with the anchor #%s", rel, l.line, l.target, frag)
			}
		}
	}
}

type mdLink struct {
	target string
	line   int
}

var (
	linkRE       = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	inlineCodeRE = regexp.MustCompile("`[^`]*`")
	schemeRE     = regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9+.-]*:`)
)

// markdownLinks returns the relative links of a Markdown file, leaving out
// code: fenced blocks, indented blocks and inline code spans.
func markdownLinks(t *testing.T, path string) []mdLink {
	t.Helper()
	var links []mdLink
	eachProseLine(t, path, func(n int, line string) {
		line = inlineCodeRE.ReplaceAllString(line, "")
		for _, m := range linkRE.FindAllStringSubmatch(line, -1) {
			if schemeRE.MatchString(m[1]) {
				continue // http:, https:, mailto:
			}
			links = append(links, mdLink{target: m[1], line: n})
		}
	})
	return links
}

// headingAnchors returns the anchors GitHub gives a Markdown file's ATX
// headings: lower case, punctuation dropped, spaces turned into hyphens,
// and a repeated anchor numbered -1, -2, ...
func headingAnchors(t *testing.T, path string) map[string]bool {
	t.Helper()
	anchors := map[string]bool{}
	seen := map[string]int{}
	eachProseLine(t, path, func(_ int, line string) {
		level := len(line) - len(strings.TrimLeft(line, "#"))
		if level == 0 || level > 6 || !strings.HasPrefix(line[level:], " ") {
			return
		}
		slug := slugify(strings.TrimSpace(line[level:]))
		if k := seen[slug]; k > 0 {
			anchors[slug+"-"+strconv.Itoa(k)] = true
		} else {
			anchors[slug] = true
		}
		seen[slug]++
	})
	return anchors
}

func slugify(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// eachProseLine calls f with each line of a Markdown file outside fenced
// and indented code blocks, numbered from 1.
func eachProseLine(t *testing.T, path string, f func(n int, line string)) {
	t.Helper()
	file, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	sc := bufio.NewScanner(file)
	sc.Buffer(nil, 1<<20)
	fenced, prevBlank := false, true
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if strings.HasPrefix(strings.TrimLeft(line, " "), "```") {
			fenced = !fenced
			continue
		}
		blank := strings.TrimSpace(line) == ""
		indented := strings.HasPrefix(line, "    ") || strings.HasPrefix(line, "\t")
		if !fenced && !(indented && prevBlank) {
			f(n, line)
		}
		// An indented block goes on until a line that is not indented.
		prevBlank = blank || (indented && prevBlank)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
}
