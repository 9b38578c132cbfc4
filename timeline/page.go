package timeline

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"html"
	"io"
)

// The page's style and script, inlined into every page: a page needs
// nothing but itself, from disk or as a CI artifact.
var (
	//go:embed page.css
	pageCSS string
	//go:embed page.js
	pageJS string
)

// Write writes p as one self-contained HTML page: its data embedded as
// JSON, rendered by its inline script, which draws only the rows in view
// so that a page of tens of thousands of events opens at once.
func Write(w io.Writer, p *Page) error {
	data, err := json.Marshal(p)
	if err != nil {
		return fmt.Errorf("encoding the page: %w", err)
	}
	// A live page talks to the server that serves it, and to nothing
	// else; a page from a file talks to nothing.
	connect := ""
	if p.Live != nil {
		connect = "; connect-src 'self'"
	}
	// json.Marshal escapes <, > and &, so the data cannot end its script
	// element.
	_, err = fmt.Fprintf(w, `<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:%s">
<title>%s</title>
<style>%s</style>
</head><body>
<div id="app"></div>
<script type="application/json" id="acptap-data">%s</script>
<script>%s</script>
</body></html>
`, connect, html.EscapeString(p.Title), pageCSS, data, pageJS)
	return err
}
