package main

import (
	"encoding/xml"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// junitDoc is what a CI system reads of a JUnit report, parsed
// independently of the types that write it.
type junitDoc struct {
	XMLName xml.Name `xml:"testsuites"`
	Suites  []struct {
		Name     string `xml:"name,attr"`
		Tests    int    `xml:"tests,attr"`
		Failures int    `xml:"failures,attr"`
		Errors   int    `xml:"errors,attr"`
		Time     string `xml:"time,attr"`
		Cases    []struct {
			Name      string `xml:"name,attr"`
			Classname string `xml:"classname,attr"`
			Time      string `xml:"time,attr"`
			Failure   *struct {
				Message string `xml:"message,attr"`
				Text    string `xml:",chardata"`
			} `xml:"failure"`
			Error *struct {
				Message string `xml:"message,attr"`
			} `xml:"error"`
			SystemOut string `xml:"system-out"`
		} `xml:"testcase"`
	} `xml:"testsuite"`
}

func readJUnit(t *testing.T, path string) junitDoc {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("the report: %v", err)
	}
	var doc junitDoc
	if err := xml.Unmarshal(b, &doc); err != nil {
		t.Fatalf("parsing the report: %v\n%s", err, b)
	}
	if len(doc.Suites) != 1 {
		t.Fatalf("%d testsuites, want 1:\n%s", len(doc.Suites), b)
	}
	return doc
}

func TestReplayJUnit(t *testing.T) {
	upstream, _ := chatUpstream(t, false)
	dir := workspace(t)
	db := filepath.Join(dir, "s.db")
	// good asks the LLM; the replayed agent's changed system prompt makes
	// request drift, a warning. bad is scripted: the replayed agent no
	// longer says what it said.
	recordSession(t, dir, db, "good", agentEnv(), []string{"--no-proxy-env", "--base-url", "OPENAI_BASE_URL=" + upstream.URL + "/v1"})
	recordSession(t, dir, db, "bad", agentEnv(), nil, "--message", "hello")
	report := filepath.Join(t.TempDir(), "report.xml")
	out, _, code := runAcptap(t, dir, agentEnv(), "replay", "--store", db, "--junit", report, "good", "bad", "--", "testagent", "--system", "changed")
	if code != ExitDiverged {
		t.Fatalf("exit %d, want %d:\n%s", code, ExitDiverged, out)
	}

	suite := readJUnit(t, report).Suites[0]
	if suite.Name != "acptap replay" || suite.Tests != 2 || suite.Failures != 1 || suite.Errors != 0 {
		t.Errorf("testsuite %q: %d tests, %d failures, %d errors; want \"acptap replay\", 2, 1, 0", suite.Name, suite.Tests, suite.Failures, suite.Errors)
	}
	if len(suite.Cases) != 2 {
		t.Fatalf("%d testcases, want 2", len(suite.Cases))
	}
	for _, c := range suite.Cases {
		if s, err := strconv.ParseFloat(c.Time, 64); err != nil || s <= 0 {
			t.Errorf("testcase %s: time %q, want seconds", c.Name, c.Time)
		}
		if c.Classname != "acptap replay" {
			t.Errorf("testcase %s: classname %q", c.Name, c.Classname)
		}
	}

	good, bad := suite.Cases[0], suite.Cases[1]
	if good.Name != "good" || good.Failure != nil || good.Error != nil {
		t.Errorf("first testcase %q, failure %v, error %v; want good, passed", good.Name, good.Failure, good.Error)
	}
	if !strings.HasPrefix(good.SystemOut, "warning: llm #") {
		t.Errorf("good's system-out = %q, want the request drift warning", good.SystemOut)
	}

	if bad.Name != "bad" || bad.Failure == nil {
		t.Fatalf("second testcase %q, failure %v; want bad, failed", bad.Name, bad.Failure)
	}
	// The message is the first divergence, as printed on FAIL's line.
	first, _, _ := strings.Cut(strings.SplitAfter(out, "FAIL bad: ")[1], "\n")
	if bad.Failure.Message != first || !strings.HasPrefix(first, "agent output differs in turn 1, agent message, update 1: content.text: ") {
		t.Errorf("failure message %q, want the first divergence %q", bad.Failure.Message, first)
	}
	for _, want := range []string{"--- recorded\n+++ replayed\n", `-        "text": "hello",`, `+        "text": "You said: fix the typo",`} {
		if !strings.Contains(bad.Failure.Text, want) {
			t.Errorf("failure text lacks %q:\n%s", want, bad.Failure.Text)
		}
	}
}

func TestReplayJUnitOtherDivergencesAndUpdate(t *testing.T) {
	dir := workspace(t)
	db := filepath.Join(dir, "s.db")
	recordSession(t, dir, db, "plain", agentEnv(), nil)
	recordSession(t, dir, db, "fixable", agentEnv(), nil, "--read", "notes.txt", "--message", "x")
	report := filepath.Join(t.TempDir(), "report.xml")
	// plain's agent now asks for a permission the recording cannot give;
	// fixable is rewritten.
	out, _, code := runAcptap(t, dir, agentEnv(), "replay", "--store", db, "--junit", report, "--update", "--timeout", "5s", "plain", "fixable", "--", "testagent", "--read", "notes.txt")
	if code != ExitDiverged {
		t.Fatalf("exit %d, want %d:\n%s", code, ExitDiverged, out)
	}
	suite := readJUnit(t, report).Suites[0]
	if suite.Tests != 2 || suite.Failures != 1 || len(suite.Cases) != 2 {
		t.Fatalf("%d tests, %d failures; want 2, 1", suite.Tests, suite.Failures)
	}
	plain, fixable := suite.Cases[0], suite.Cases[1]
	if plain.Failure == nil {
		t.Fatal("plain did not fail")
	}
	for _, want := range []string{"also: editor side: ", "not updated: cannot update the recording \"plain\"", "--- recorded"} {
		if !strings.Contains(plain.Failure.Text, want) {
			t.Errorf("plain's failure text lacks %q:\n%s", want, plain.Failure.Text)
		}
	}
	if fixable.Failure != nil || !strings.HasPrefix(fixable.SystemOut, "updated: expected agent stream rewritten: ") {
		t.Errorf("fixable: failure %v, system-out %q; want passed and updated", fixable.Failure, fixable.SystemOut)
	}
}

func TestReplayJUnitUnwritable(t *testing.T) {
	dir := workspace(t)
	db := filepath.Join(dir, "s.db")
	recordSession(t, dir, db, "a", agentEnv(), nil)
	for _, path := range []string{
		filepath.Join(dir, "missing", "report.xml"),
		dir, // a directory
	} {
		out, errOut, code := runAcptap(t, dir, agentEnv(), "replay", "--store", db, "--junit", path, "a")
		if code != ExitUsage || out != "" {
			t.Errorf("--junit %s: exit %d, stdout %q; want %d before any replay", path, code, out, ExitUsage)
		}
		if !strings.HasPrefix(errOut, "acptap: replay: cannot write the --junit report ") || strings.Count(errOut, "\n") != 1 {
			t.Errorf("--junit %s: stderr %q, want one line", path, errOut)
		}
	}
	// A usage error found after the check leaves no report behind.
	report := filepath.Join(dir, "report.xml")
	if _, _, code := runAcptap(t, dir, agentEnv(), "replay", "--store", db, "--junit", report, "--rules", filepath.Join(dir, "no-rules.json"), "a"); code != ExitUsage {
		t.Errorf("bad --rules: exit %d, want %d", code, ExitUsage)
	}
	if _, _, code := runAcptap(t, dir, agentEnv(), "replay", "--store", db, "--junit", report, "nosuch"); code != ExitUsage {
		t.Errorf("missing recording: exit %d, want %d", code, ExitUsage)
	}
	if _, err := os.Stat(report); !os.IsNotExist(err) {
		t.Errorf("a report was left after usage errors: %v", err)
	}
}

func TestJUnitTextRoundTrip(t *testing.T) {
	in := "diff ]]> of \x1b[31mcolour\x1b[0m, \xff bytes\x00 and ünïcode\n"
	want := "diff ]]> of \uFFFD[31mcolour\uFFFD[0m, \uFFFD bytes\uFFFD and ünïcode\n"
	b, err := xml.Marshal(junitProblem{Message: in, Text: xmlText(in)})
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Message string `xml:"message,attr"`
		Text    string `xml:",chardata"`
	}
	if err := xml.Unmarshal(b, &got); err != nil {
		t.Fatalf("%v\n%s", err, b)
	}
	if got.Text != want {
		t.Errorf("text = %q, want %q", got.Text, want)
	}
	if got.Message != want {
		t.Errorf("message = %q, want %q", got.Message, want)
	}
}
