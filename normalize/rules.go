package normalize

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"regexp"
	"regexp/syntax"
	"strconv"
	"strings"
)

// A Rule is a user rule, applied after the default rules. A path rule
// replaces every value at the paths its pattern matches with a
// placeholder; a regexp rule rewrites every string value it matches, or,
// with a path, the strings and numbers at the paths its pattern matches;
// a presence rule leaves some of the agent's frames out of a Transcript.
// Rules come from ParseRules or LoadRules, or from calibrate.Learn; the zero Rule
// does nothing.
type Rule struct {
	pattern     []segment // the parsed path of a path rule or a regexp rule with a path; nil otherwise
	path        string
	placeholder string

	re      *regexp.Regexp // a regexp rule's expression; nil otherwise
	replace string

	presence *presence // a presence rule's; nil otherwise

	comment string
}

// String returns the rule in the JSON form ParseRules reads.
func (r Rule) String() string {
	m := map[string]string{}
	if p := r.presence; p != nil {
		m["optional"] = p.what
		if p.at != "" {
			m["at"] = p.at
		}
		if p.after != "" {
			m["after"] = p.after
		}
	}
	if r.pattern != nil {
		m["path"] = r.path
	}
	switch {
	case r.re != nil:
		m["regexp"], m["replace"] = r.re.String(), r.replace
	case r.pattern != nil:
		m["placeholder"] = r.placeholder
	}
	if r.comment != "" {
		m["comment"] = r.comment
	}
	return string(encode(m))
}

// Comment returns the rule's comment, "" if it has none.
func (r Rule) Comment() string { return r.comment }

// WithComment returns the rule with the comment c, "" for none.
func (r Rule) WithComment(c string) Rule {
	r.comment = c
	return r
}

// FormatRules returns rules as a rules file that ParseRules reads back: a
// JSON array, one rule to a line.
func FormatRules(rules []Rule) []byte {
	if len(rules) == 0 {
		return []byte("[]\n")
	}
	var b bytes.Buffer
	b.WriteString("[\n")
	for i, r := range rules {
		b.WriteString("  ")
		b.WriteString(r.String())
		if i < len(rules)-1 {
			b.WriteByte(',')
		}
		b.WriteByte('\n')
	}
	b.WriteString("]\n")
	return b.Bytes()
}

// ruleJSON is one element of a rules file. Pointers tell a missing field
// from an empty one: an empty replacement deletes, a missing one is a
// mistake.
type ruleJSON struct {
	Path        *string `json:"path"`
	Placeholder *string `json:"placeholder"`
	Regexp      *string `json:"regexp"`
	Replace     *string `json:"replace"`
	Optional    *string `json:"optional"`
	At          *string `json:"at"`
	After       *string `json:"after"`
	Comment     string  `json:"comment"`
}

// LoadRules reads a rules file; see ParseRules for its format.
func LoadRules(path string) ([]Rule, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("normalize: load rules: %w", err)
	}
	rules, err := ParseRules(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return rules, nil
}

// ParseRules parses a rules file: a JSON array of objects, each either
//
//	{"path": "$.params.update.rawInput.*.started", "placeholder": "<started>"}
//
// or
//
//	{"regexp": "build ([0-9]+)", "replace": "build N"}
//
// and optionally a "comment". A path starts at the root "$" of the
// normalized value (one ACP frame, or the object Request returns) and goes
// on with .key, ["any key"], [index], .* or [*] for any one key or index,
// and .** for any number of levels, none included; FirstDifference reports
// paths in the same syntax. A regexp is Go RE2 syntax, and its replacement
// may refer to groups as $1 or ${name}, as in regexp.Regexp.Expand. A
// regexp rule may also have a path,
//
//	{"path": "$.params.update.rawOutput.pgid", "regexp": "^[0-9]+$", "replace": "<pgid>"}
//
// and then rewrites only the values at the paths it matches: strings, and
// numbers, whose literal (8680) it rewrites, the result a string.
//
// A presence rule says that some of the agent's frames may be there in
// one run and not in another, naming them by kind (see FrameKind) and
// place:
//
//	{"optional": "update tool_call_update completed", "at": "last"}
//	{"optional": "request _vendor/drain", "after": "update tool_call_update completed"}
//	{"optional": "notification _vendor/progress"}
//
// The first leaves out of the comparison a tool call's last updates of
// status completed (never the first value of a tool call's stream, so a
// tool call is never missing whole); the second an agent request of
// method _vendor/drain when the agent's frame before it is a completed
// tool call update (state notifications and other such requests passed
// over); the third every notification of a method. An update takes "at":
// "last"; a request may take "after"; a notification takes neither. What
// a presence rule leaves out is left out in the recording and in the
// replay alike, where Transcript arranges the frames per stream (not
// under Strict); a replay also takes the editor side's failure to answer
// such a request, or the request's absence, for no divergence.
//
// Normalizing twice must equal normalizing once, so a regexp must not match
// the empty string, and its replacement must not be rewritten again by it:
// {"regexp": "[0-9]+", "replace": "N1"} is rejected. The check expands
// group references to empty strings; a replacement that brings back a
// match only through its groups is not caught.
//
// Errors name the rule by index, such as rules[2].regexp, and wrap ErrRules.
func ParseRules(data []byte) ([]Rule, error) {
	var raw []json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		return nil, fmt.Errorf("%w: %s", ErrRules, jsonProblem(data, err, "want a JSON array of rule objects"))
	}
	if raw == nil {
		return nil, fmt.Errorf("%w: want a JSON array of rule objects, got null", ErrRules)
	}
	rules := make([]Rule, 0, len(raw))
	for i, elem := range raw {
		r, field, err := parseRule(elem)
		if err != nil {
			where := fmt.Sprintf("rules[%d]", i)
			if field != "" {
				where += "." + field
			}
			return nil, fmt.Errorf("%w: %s: %v", ErrRules, where, err)
		}
		rules = append(rules, r)
	}
	return rules, nil
}

// parseRule parses one rule object; on error it also names the field at
// fault, if one is.
func parseRule(elem json.RawMessage) (Rule, string, error) {
	var rj ruleJSON
	dec := json.NewDecoder(bytes.NewReader(elem))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&rj); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			if te.Field == "" {
				return Rule{}, "", fmt.Errorf("want an object, got %s", te.Value)
			}
			return Rule{}, te.Field, fmt.Errorf("want a string, got %s", te.Value)
		}
		if name, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
			return Rule{}, "", fmt.Errorf("unknown field %s (want path and placeholder, regexp and replace, or optional)", name)
		}
		return Rule{}, "", err
	}
	if rj.Optional != nil {
		p, field, err := parsePresence(rj)
		if err != nil {
			return Rule{}, field, err
		}
		return Rule{presence: &p, comment: rj.Comment}, "", nil
	}
	if rj.At != nil || rj.After != nil {
		field := "at"
		if rj.At == nil {
			field = "after"
		}
		return Rule{}, field, errors.New("belongs to a presence rule, which names its frames in optional")
	}
	switch {
	case rj.Path != nil && rj.Regexp != nil && rj.Placeholder != nil:
		return Rule{}, "", errors.New("has a path, a regexp and a placeholder; a path rule takes a placeholder, a regexp rule (with or without a path) a replace")
	case rj.Path != nil && rj.Regexp == nil:
		if rj.Replace != nil {
			return Rule{}, "replace", errors.New("belongs to a regexp rule; a path rule takes a placeholder")
		}
		if rj.Placeholder == nil {
			return Rule{}, "placeholder", errors.New("missing: a path rule needs the value to put at its path")
		}
		pattern, err := parsePath(*rj.Path)
		if err != nil {
			return Rule{}, "path", err
		}
		return Rule{pattern: pattern, path: *rj.Path, placeholder: *rj.Placeholder, comment: rj.Comment}, "", nil
	case rj.Regexp != nil:
		if rj.Placeholder != nil {
			return Rule{}, "placeholder", errors.New("belongs to a path rule; a regexp rule takes a replace")
		}
		if rj.Replace == nil {
			return Rule{}, "replace", errors.New("missing: a regexp rule needs a replacement (\"\" deletes)")
		}
		re, err := regexp.Compile(*rj.Regexp)
		if err != nil {
			var se *syntax.Error
			if errors.As(err, &se) {
				return Rule{}, "regexp", fmt.Errorf("%s in %q", se.Code, se.Expr)
			}
			return Rule{}, "regexp", err
		}
		if re.MatchString("") {
			return Rule{}, "regexp", fmt.Errorf("%q matches the empty string, so it would insert its replacement everywhere", *rj.Regexp)
		}
		lit := groupRef.ReplaceAllStringFunc(*rj.Replace, func(ref string) string {
			if ref == "$$" {
				return "$"
			}
			return ""
		})
		if again := re.ReplaceAllString(lit, *rj.Replace); again != lit {
			return Rule{}, "replace", fmt.Errorf("%q is rewritten again by the regexp (to %q), so normalizing twice would differ from once", lit, again)
		}
		r := Rule{re: re, replace: *rj.Replace, comment: rj.Comment}
		if rj.Path != nil {
			pattern, err := parsePath(*rj.Path)
			if err != nil {
				return Rule{}, "path", err
			}
			r.pattern, r.path = pattern, *rj.Path
		}
		return r, "", nil
	}
	return Rule{}, "", errors.New("has neither path, regexp nor optional")
}

// groupRef matches the group references of a regexp replacement template.
var groupRef = regexp.MustCompile(`\$(\$|\{[^}]*\}|[A-Za-z0-9_]+)`)

// jsonProblem describes a JSON decoding error in one line, with the line
// and column of a syntax error.
func jsonProblem(data []byte, err error, want string) string {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		// Offset counts the byte at fault.
		line, col := position(data, se.Offset-1)
		return fmt.Sprintf("line %d, column %d: %v", line, col, err)
	}
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		return fmt.Sprintf("%s, got %s", want, te.Value)
	}
	return err.Error()
}

// position returns the 1-based line and column of the byte at offset off
// in data.
func position(data []byte, off int64) (line, col int) {
	off = min(max(off, 0), int64(len(data)))
	before := data[:off]
	line = bytes.Count(before, []byte("\n")) + 1
	col = len(before) - bytes.LastIndexByte(before, '\n')
	return line, col
}

// A segment is one step of a path pattern.
type segment struct {
	kind  segKind
	key   string
	index int
}

type segKind uint8

const (
	segKey   segKind = iota // an object member
	segIndex                // an array element
	segAny                  // any one member or element
	segDeep                 // any number of steps, none included
)

// A step is one step of the path to a value: an object key, or an array
// index when isIndex.
type step struct {
	key     string
	index   int
	isIndex bool
}

// parsePath parses a path pattern of a rule.
func parsePath(p string) ([]segment, error) {
	if !strings.HasPrefix(p, "$") {
		return nil, errors.New(`must start with "$", the root of the value`)
	}
	segs := []segment{}
	i := 1
	for i < len(p) {
		switch p[i] {
		case '.':
			i++
			j := i
			for j < len(p) && p[j] != '.' && p[j] != '[' {
				j++
			}
			name := p[i:j]
			switch name {
			case "":
				return nil, fmt.Errorf("empty key at offset %d (use .** for any depth)", i)
			case "*":
				segs = append(segs, segment{kind: segAny})
			case "**":
				segs = append(segs, segment{kind: segDeep})
			default:
				segs = append(segs, segment{kind: segKey, key: name})
			}
			i = j
		case '[':
			seg, n, err := parseBracket(p[i:])
			if err != nil {
				return nil, fmt.Errorf("%v at offset %d", err, i)
			}
			segs = append(segs, seg)
			i += n
		default:
			return nil, fmt.Errorf("unexpected %q at offset %d (want . or [)", p[i], i)
		}
	}
	return segs, nil
}

// parseBracket parses [*], [N] or ["key"] at the start of s and returns
// the segment and the bytes it took.
func parseBracket(s string) (segment, int, error) {
	if strings.HasPrefix(s, "[*]") {
		return segment{kind: segAny}, 3, nil
	}
	if strings.HasPrefix(s, `["`) {
		dec := json.NewDecoder(strings.NewReader(s[1:]))
		var key string
		if err := dec.Decode(&key); err != nil {
			return segment{}, 0, errors.New("bad quoted key")
		}
		n := 1 + int(dec.InputOffset())
		if n >= len(s) || s[n] != ']' {
			return segment{}, 0, errors.New("missing ] after quoted key")
		}
		return segment{kind: segKey, key: key}, n + 1, nil
	}
	end := strings.IndexByte(s, ']')
	if end < 0 {
		return segment{}, 0, errors.New("missing ]")
	}
	digits := s[1:end]
	idx, err := strconv.Atoi(digits)
	if err != nil || strings.Trim(digits, "0123456789") != "" {
		return segment{}, 0, fmt.Errorf("bad index %q (want a number, *, or a quoted key)", digits)
	}
	return segment{kind: segIndex, index: idx}, end + 1, nil
}

// matchPath reports whether a path pattern matches the path of a value.
// It is a dynamic program over both, linear in their product, so that
// patterns with many ** stay cheap.
func matchPath(pattern []segment, path []step) bool {
	// ok[j] says whether pattern[:i] matches path[:j], for the current i.
	ok := make([]bool, len(path)+1)
	ok[0] = true
	next := make([]bool, len(path)+1)
	for _, seg := range pattern {
		clear(next)
		for j := range next {
			switch seg.kind {
			case segDeep:
				next[j] = ok[j] || (j > 0 && next[j-1])
			default:
				next[j] = j > 0 && ok[j-1] && seg.matches(path[j-1])
			}
		}
		ok, next = next, ok
	}
	return ok[len(path)]
}

func (seg segment) matches(s step) bool {
	switch seg.kind {
	case segKey:
		return !s.isIndex && s.key == seg.key
	case segIndex:
		return s.isIndex && s.index == seg.index
	}
	return true
}

// applyRules applies the user rules, in order, to v, which sits at path,
// and to everything inside it. v is a freshly normalized value, changed in
// place.
//
// A string is rewritten until no rule changes it (at most maxRuleRounds
// times over): a replacement can form a new match with the text around it
// (ab → a turns aabb into aab, then aa), which the check of the
// replacement alone in ParseRules cannot see, and normalizing must give
// the same value once as twice.
func applyRules(rules []Rule, v any, path []step) any {
	if len(rules) == 0 {
		return v
	}
	if s, ok := v.(string); ok {
		for range maxRuleRounds {
			next := applyRulesOnce(rules, s, path)
			t, ok := next.(string)
			if !ok || t == s {
				return next
			}
			s = t
		}
		return s
	}
	return applyRulesOnce(rules, v, path)
}

// maxRuleRounds bounds the rewriting of a string by the rules, for rules
// that would rewrite each other's output forever.
const maxRuleRounds = 16

// applyRulesOnce applies each rule once, in order, to v and everything
// inside it.
func applyRulesOnce(rules []Rule, v any, path []step) any {
	for _, r := range rules {
		switch {
		case r.re != nil:
			switch x := v.(type) {
			case string:
				if r.pattern == nil || matchPath(r.pattern, path) {
					v = r.re.ReplaceAllString(x, r.replace)
				}
			case json.Number:
				if r.pattern != nil && matchPath(r.pattern, path) {
					if t := r.re.ReplaceAllString(string(x), r.replace); t != string(x) {
						v = t
					}
				}
			}
		case r.pattern != nil:
			if matchPath(r.pattern, path) {
				v = r.placeholder
			}
		}
	}
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			x[k] = applyRules(rules, e, append(path, step{key: k}))
		}
	case []any:
		for i, e := range x {
			x[i] = applyRules(rules, e, append(path, step{index: i, isIndex: true}))
		}
	}
	return v
}
