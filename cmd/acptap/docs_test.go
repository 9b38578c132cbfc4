package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestDocs checks the pages a user reads: README.md is short (under 300
// lines) and gives the two commands that need no set-up; every relative
// link of README.md and docs/*.md leads to a file that exists, and an
// #anchor to a heading of that file.
func TestDocs(t *testing.T) {
	root := filepath.Join("..", "..")
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(readme), "\n"); n >= 300 {
		t.Errorf("README.md has %d lines, want under 300: move detail to docs/", n)
	}
	for _, cmd := range []string{"\n    go run ./cmd/acptap demo\n", "\n    ./scripts/test\n"} {
		if !strings.Contains(string(readme), cmd) {
			t.Errorf("README.md lacks the command %q", strings.TrimSpace(cmd))
		}
	}
	pages, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	pages = append(pages, filepath.Join(root, "README.md"), filepath.Join(root, "BENCHMARKS.md"))
	link := regexp.MustCompile(`\[[^\]]*\]\(([^)\s]+)\)`)
	for _, page := range pages {
		text, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range link.FindAllStringSubmatch(withoutCode(string(text)), -1) {
			target := m[1]
			if regexp.MustCompile(`^[a-z]+:`).MatchString(target) {
				continue // a URL
			}
			file, anchor, _ := strings.Cut(target, "#")
			path := page
			if file != "" {
				path = filepath.Join(filepath.Dir(page), file)
			}
			b, err := os.ReadFile(path)
			if err != nil {
				t.Errorf("%s: link %s: %v", rel(root, page), target, err)
				continue
			}
			if anchor != "" && !strings.HasSuffix(path, ".md") {
				t.Errorf("%s: link %s: an anchor into a file that is not Markdown", rel(root, page), target)
			}
			if anchor != "" && !headings(string(b))[anchor] {
				t.Errorf("%s: link %s: %s has no heading #%s", rel(root, page), target, rel(root, path), anchor)
			}
		}
	}
}

// withoutCode returns a Markdown text without its fenced code blocks,
// whose brackets are not links.
func withoutCode(s string) string {
	var b strings.Builder
	fenced := false
	for line := range strings.Lines(s) {
		if strings.HasPrefix(line, "```") {
			fenced = !fenced
			continue
		}
		if !fenced {
			b.WriteString(line)
		}
	}
	return b.String()
}

// headings returns the anchors of a Markdown text's headings, as GitHub
// makes them: lower case, punctuation dropped, spaces as hyphens.
func headings(s string) map[string]bool {
	anchors := map[string]bool{}
	drop := regexp.MustCompile(`[^\p{L}\p{N}_\- ]`)
	for line := range strings.Lines(withoutCode(s)) {
		h := strings.TrimLeft(line, "#")
		if len(h) == len(line) || !strings.HasPrefix(h, " ") {
			continue
		}
		a := strings.ReplaceAll(drop.ReplaceAllString(strings.ToLower(strings.TrimSpace(h)), ""), " ", "-")
		anchors[a] = true
	}
	return anchors
}

func rel(root, path string) string {
	r, err := filepath.Rel(root, path)
	if err != nil {
		return path
	}
	return r
}
