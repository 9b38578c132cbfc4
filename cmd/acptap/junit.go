package main

import (
	"encoding/xml"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"time"

	"github.com/acptap/acptap/replay"
)

// The JUnit XML report of `acptap replay --junit FILE`, the format CI
// systems read test results in: one testsuite, "acptap replay", with a
// testcase per recording. A diverged replay is a failure whose message is
// the first divergence and whose text holds the others and the diff; a
// replay that could not run (exit 2) is an error; warnings, and what
// --update did, go to the testcase's system-out.

// junitSuiteName names the testsuite and classifies its testcases.
const junitSuiteName = "acptap replay"

type junitSuites struct {
	XMLName  xml.Name     `xml:"testsuites"`
	Name     string       `xml:"name,attr"`
	Tests    int          `xml:"tests,attr"`
	Failures int          `xml:"failures,attr"`
	Errors   int          `xml:"errors,attr"`
	Time     string       `xml:"time,attr"`
	Suites   []junitSuite `xml:"testsuite"`
}

type junitSuite struct {
	Name      string      `xml:"name,attr"`
	Tests     int         `xml:"tests,attr"`
	Failures  int         `xml:"failures,attr"`
	Errors    int         `xml:"errors,attr"`
	Skipped   int         `xml:"skipped,attr"`
	Time      string      `xml:"time,attr"`
	Timestamp string      `xml:"timestamp,attr"`
	Cases     []junitCase `xml:"testcase"`
}

type junitCase struct {
	Name      string        `xml:"name,attr"`
	Classname string        `xml:"classname,attr"`
	Time      string        `xml:"time,attr"`
	Failure   *junitProblem `xml:"failure,omitempty"`
	Error     *junitProblem `xml:"error,omitempty"`
	SystemOut *junitText    `xml:"system-out,omitempty"`
}

// junitProblem is a failure or an error.
type junitProblem struct {
	Message string `xml:"message,attr"`
	Type    string `xml:"type,attr,omitempty"`
	Text    string `xml:",cdata"` // xmlText
}

// junitText is the text of an element, readable as it is in the file.
type junitText struct {
	Text string `xml:",cdata"` // xmlText
}

// junitReport collects the replays' outcomes and writes the report. A nil
// *junitReport (no --junit) does nothing.
type junitReport struct {
	path    string
	f       *os.File
	created bool // the file did not exist: remove it unless a report is written
	written bool
	started time.Time
	cases   []junitCase
}

// openJUnit opens path for the report, so that an unwritable path is a
// usage error before anything is replayed. It returns nil for no path.
// The file is created if missing but left as it is until write.
func openJUnit(path string) (*junitReport, error) {
	if path == "" {
		return nil, nil
	}
	_, statErr := os.Stat(path)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE, 0o666)
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return nil, usageErrorf("cannot write the --junit report %s: %v; pass a writable file path", path, err)
	}
	return &junitReport{path: path, f: f, created: errors.Is(statErr, fs.ErrNotExist), started: time.Now()}, nil
}

// add records the outcome of a replay; up is what --update did, nil
// without --update or when the replay was equal.
func (r *junitReport) add(res *replay.Result, up *updateOutcome) {
	if r == nil {
		return
	}
	c := junitCase{Name: res.Name, Classname: junitSuiteName, Time: seconds(res.Duration)}
	var out strings.Builder
	for _, f := range res.StdioFaults {
		fmt.Fprintf(&out, "%s\n", f)
	}
	for _, w := range res.Warnings {
		fmt.Fprintf(&out, "warning: %s\n", w.Message)
	}
	switch {
	case res.Equal():
	case up != nil && up.err == nil:
		fmt.Fprintf(&out, "updated: %s\n\n%s", up.summary(), res.Diff)
	default:
		var text strings.Builder
		for _, d := range res.Divergences[1:] {
			fmt.Fprintf(&text, "also: %s\n", d.Message)
		}
		if up != nil {
			fmt.Fprintf(&text, "not updated: %v\n", up.err)
		}
		if res.Diff != "" {
			if text.Len() > 0 {
				text.WriteByte('\n')
			}
			text.WriteString(res.Diff)
		}
		c.Failure = &junitProblem{Message: res.Divergences[0].Message, Type: "divergence", Text: xmlText(text.String())}
	}
	if out.Len() > 0 {
		c.SystemOut = &junitText{xmlText(out.String())}
	}
	r.cases = append(r.cases, c)
}

// addError records a replay that could not run.
func (r *junitReport) addError(name string, took time.Duration, err error) {
	if r == nil {
		return
	}
	r.cases = append(r.cases, junitCase{
		Name:      name,
		Classname: junitSuiteName,
		Time:      seconds(took),
		Error:     &junitProblem{Message: err.Error(), Type: "error"},
	})
}

// write writes the report over the file's content.
func (r *junitReport) write() error {
	if r == nil {
		return nil
	}
	suite := junitSuite{
		Name:      junitSuiteName,
		Tests:     len(r.cases),
		Time:      seconds(time.Since(r.started)),
		Timestamp: r.started.Format("2006-01-02T15:04:05"),
		Cases:     r.cases,
	}
	for _, c := range r.cases {
		if c.Failure != nil {
			suite.Failures++
		}
		if c.Error != nil {
			suite.Errors++
		}
	}
	doc := junitSuites{
		Name:     junitSuiteName,
		Tests:    suite.Tests,
		Failures: suite.Failures,
		Errors:   suite.Errors,
		Time:     suite.Time,
		Suites:   []junitSuite{suite},
	}
	b, err := xml.MarshalIndent(doc, "", "  ")
	if err == nil {
		b = append([]byte(xml.Header), append(b, '\n')...)
		err = r.f.Truncate(0)
	}
	if err == nil {
		_, err = r.f.WriteAt(b, 0)
	}
	if err == nil {
		err = r.f.Sync()
	}
	if err != nil {
		return usageErrorf("writing the --junit report %s: %v", r.path, err)
	}
	r.written = true
	return nil
}

// close closes the file, and removes it if it was created for a report
// that was never written (a usage error came first).
func (r *junitReport) close() {
	if r == nil {
		return
	}
	r.f.Close()
	if r.created && !r.written {
		os.Remove(r.path)
	}
}

// xmlText makes s fit in a CDATA section: invalid UTF-8 and the
// characters XML does not allow (most control characters) become U+FFFD.
// encoding/xml splits the sections around "]]>" itself.
func xmlText(s string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r == '\t' || r == '\n' || r == '\r',
			0x20 <= r && r <= 0xD7FF,
			0xE000 <= r && r <= 0xFFFD,
			0x10000 <= r && r <= 0x10FFFF:
			return r
		}
		return '\uFFFD'
	}, strings.ToValidUTF8(s, "\uFFFD"))
}

// seconds formats d for a JUnit time attribute.
func seconds(d time.Duration) string {
	return fmt.Sprintf("%.3f", d.Seconds())
}
