package lane

import "testing"

func TestStringParse(t *testing.T) {
	for _, l := range []Lane{Editor, Agent, Stderr, LLM} {
		got, ok := Parse(l.String())
		if !ok || got != l {
			t.Errorf("Parse(%q) = %v, %v; want %v, true", l.String(), got, ok, l)
		}
	}
	for _, s := range []string{"", "stdin", "lane(0)", "Editor"} {
		if l, ok := Parse(s); ok {
			t.Errorf("Parse(%q) = %v, true; want false", s, l)
		}
	}
	if got := Lane(0).String(); got != "lane(0)" {
		t.Errorf("Lane(0).String() = %q, want lane(0)", got)
	}
}
