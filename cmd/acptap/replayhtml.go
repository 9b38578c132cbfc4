package main

import (
	"io"
	"os"
	"path/filepath"

	"github.com/acptap/acptap/replay"
	"github.com/acptap/acptap/store"
	"github.com/acptap/acptap/timeline"
)

// htmlPages writes replay --html DIR: a page per recording replayed and
// DIR/index.html. A nil *htmlPages writes nothing.
type htmlPages struct {
	dir     string
	entries []timeline.IndexEntry
}

// newHTMLPages makes DIR; nil for dir "".
func newHTMLPages(dir string) (*htmlPages, error) {
	if dir == "" {
		return nil, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, usageErrorf("--html %s: %v; pass a directory that can be made", dir, unwrapPath(err))
	}
	return &htmlPages{dir: dir}, nil
}

// add writes the page of one replay; up is what --update did, as for
// printResult.
func (h *htmlPages) add(st *store.Store, res *replay.Result, up *updateOutcome) error {
	if h == nil {
		return nil
	}
	e := timeline.IndexEntry{Name: res.Name, Status: "PASS", Page: res.Name + ".html"}
	if res.Name == "index" {
		e.Page = "index.recording.html"
	}
	switch {
	case up != nil && up.err == nil:
		e.Status, e.Message = "UPDATED", up.summary()
	case !res.Equal():
		e.Status, e.Message = "FAIL", res.Divergences[0].Message
	}
	page, err := timeline.Replay(st, res, e.Status)
	if err != nil {
		return usageErrorf("--html: the page of %s: %v", res.Name, err)
	}
	page.Acptap = version()
	if err := writeFileAtomic(filepath.Join(h.dir, e.Page), "--html", func(w io.Writer) error { return timeline.Write(w, page) }); err != nil {
		return err
	}
	h.entries = append(h.entries, e)
	return nil
}

// write writes DIR/index.html.
func (h *htmlPages) write() error {
	if h == nil {
		return nil
	}
	return writeFileAtomic(filepath.Join(h.dir, "index.html"), "--html", func(w io.Writer) error {
		return timeline.WriteIndex(w, "acptap replay", h.entries)
	})
}
