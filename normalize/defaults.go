package normalize

import (
	"encoding/json"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// A source says where a value comes from: a few default rules hold only for
// LLM requests.
type source uint8

const (
	fromACP    source = iota // an ACP frame
	fromWire                 // the body of an LLM request
	fromHeader               // the URL or a header of an LLM request
)

// maxRounds bounds the rewriting of one string. A default rewrite turns
// text that is not a placeholder into a placeholder, or JSON into its
// canonical form, which stays as it is; so the rounds end, and two suffice
// unless a rewrite uncovers another (a root that follows a UUID counts as
// the start of a path only once the UUID is a placeholder).
const maxRounds = 8

// str normalizes one string with the default rules, repeating until
// nothing changes, so that its result is left alone by a second run.
func (n *Normalizer) str(s string, src source) string {
	if isPlaceholder(s) {
		return s
	}
	for range maxRounds {
		t := n.strOnce(s, src)
		if t == s {
			break
		}
		s = t
	}
	return s
}

func (n *Normalizer) strOnce(s string, src source) string {
	if n.defaults {
		if t, ok := n.embedded(s, src); ok {
			return t
		}
	}
	s = replaceRoots(n.roots, s)
	if !n.defaults {
		return s
	}
	s = replaceTimes(s)
	if src == fromWire {
		s = replaceDates(s)
	}
	s = replaceDurations(s)
	s = replacePIDs(s)
	return n.replaceIDs(s)
}

// embedded normalizes a string that holds a JSON object, such as the
// arguments of a tool call or the output of a tool in an LLM request: its
// volatile members are as volatile as anywhere else. The result is
// canonical JSON, so white space inside the string is not compared.
func (n *Normalizer) embedded(s string, src source) (string, bool) {
	t := strings.TrimSpace(s)
	if len(t) < 2 || t[0] != '{' || t[len(t)-1] != '}' {
		return "", false
	}
	v, ok := decode([]byte(t))
	if !ok {
		return "", false
	}
	return string(encode(n.value(v, src, false))), true
}

// value normalizes a decoded JSON value. inUsage says that v is inside a
// token usage report.
func (n *Normalizer) value(v any, src source, inUsage bool) any {
	switch x := v.(type) {
	case string:
		return n.str(x, src)
	case map[string]any:
		out := make(map[string]any, len(x))
		// Sorted keys make the numbering of placeholders the same in
		// two runs.
		for _, k := range sortedKeys(x) {
			nk := n.str(k, src)
			out[nk] = n.member(nk, x[k], src, inUsage)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = n.value(e, src, inUsage)
		}
		return out
	}
	return v
}

// member normalizes the value of an object member with the rules its key
// selects.
func (n *Normalizer) member(key string, v any, src source, inUsage bool) any {
	if !n.defaults {
		return n.value(v, src, inUsage)
	}
	folded := foldKey(key)
	if kind := linkedKind(key, src); kind != "" {
		switch x := v.(type) {
		case string:
			if x != "" && !isPlaceholder(x) {
				return n.link(kind, valueKey(x))
			}
			return x
		case json.Number:
			return n.link(kind, "n:"+string(x))
		}
	}
	switch {
	case durationKey(folded):
		if isDuration(v) {
			return "<duration>"
		}
	case timeKey(key, folded):
		if isTime(v) {
			return "<time>"
		}
	case folded == "pid" || folded == "ppid" || folded == "processid":
		if isInteger(v) {
			return "<pid>"
		}
	case folded == "systemfingerprint" || folded == "obfuscation":
		if s, ok := v.(string); ok && s != "" && !isPlaceholder(s) {
			return "<" + strings.TrimPrefix(folded, "system") + ">"
		}
	case inUsage && strings.Contains(folded, "token"),
		src == fromWire && (folded == "promptevalcount" || folded == "evalcount"):
		if _, ok := v.(json.Number); ok {
			return "<tokens>"
		}
	}
	return n.value(v, src, inUsage || usageKey(folded))
}

// link returns the placeholder of the value with the given key ("s:" and a
// string, or "n:" and a number literal), handing out the next one of kind
// the first time. A value keeps the placeholder it got first wherever it
// shows up again, under any key or inside any text, so references stay
// linked.
func (n *Normalizer) link(kind, key string) string {
	p, ok := n.links[key]
	if !ok {
		n.counts[kind]++
		p = "<" + kind + ":" + strconv.Itoa(n.counts[kind]) + ">"
		n.links[key] = p
	}
	if n.refs != nil {
		n.refs.note(kind, key, p, !ok, n.counts[kind])
	}
	return p
}

// valueKey returns the key of a string in the table of linked values. A
// UUID is one value in any letter case.
func valueKey(s string) string {
	if len(s) == 36 && uuidAt(s, 0) == 36 {
		return "s:" + strings.ToLower(s)
	}
	return "s:" + s
}

// linkedKeys maps the keys whose values are ids minted at run time to the
// kind of their placeholders.
var linkedKeys = map[string]string{
	"sessionId": "sessionId", "session_id": "sessionId", "sessionID": "sessionId",
	"toolCallId": "toolCallId", "tool_call_id": "toolCallId", "toolCallID": "toolCallId",
	"call_id": "toolCallId", "callId": "toolCallId", "tool_use_id": "toolCallId", "toolUseId": "toolCallId",
	"terminalId": "terminalId", "terminal_id": "terminalId", "terminalID": "terminalId",
	"messageId": "messageId", "message_id": "messageId", "messageID": "messageId", "userMessageId": "messageId",
	// A permission option's id is the agent's name for it; the editor
	// chooses by its kind, and a replay answers by kind too.
	"optionId": "optionId",

	"prompt_cache_key": "id", "conversation_id": "id", "conversationId": "id",
	"request_id": "id", "requestId": "id", "response_id": "id", "responseId": "id",
	"previous_response_id": "id", "item_id": "id", "itemId": "id",
	"user_id": "id", "userId": "id", "installation_id": "id", "installationId": "id",
	"device_id": "id", "deviceId": "id", "machine_id": "id", "machineId": "id",
	"safety_identifier": "id", "turn_id": "id", "turnId": "id", "thread_id": "id", "threadId": "id",
	"trace_id": "id", "traceId": "id", "prompt_id": "id", "promptId": "id", "user_prompt_id": "id",
}

// linkedKind returns the placeholder kind of the ids under key, or "".
// A bare "id" is an id only in LLM requests: in ACP it names modes, models
// and config options, whose values are part of the agent's behaviour.
func linkedKind(key string, src source) string {
	if key == "id" && src == fromWire {
		return "id"
	}
	return linkedKeys[key]
}

// foldKey lowercases a key and drops '_' and '-', so that started_at_ms,
// startedAtMs and started-at-ms are alike.
func foldKey(k string) string {
	var b strings.Builder
	for i := 0; i < len(k); i++ {
		c := k[i]
		switch {
		case c == '_' || c == '-':
		case 'A' <= c && c <= 'Z':
			b.WriteByte(c + 'a' - 'A')
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

// durationKey reports whether a folded key names a duration: duration,
// duration_ms, total_duration, elapsed_ms, took, latency_ms, wall_time.
func durationKey(folded string) bool {
	for _, w := range []string{"duration", "elapsed", "latency", "walltime", "cputime"} {
		if strings.Contains(folded, w) {
			return true
		}
	}
	return strings.HasPrefix(folded, "took")
}

// timeKey reports whether a key names a point in time: created,
// timestamp, updated, or anything ending in _at, _at_ms, At, _time,
// Time, _ts or _date. key is the key as written: "At" must be a camel-case
// word, so that "format" and "chat" are not times.
func timeKey(key, folded string) bool {
	switch folded {
	case "created", "updated", "modified", "timestamp", "time", "ts", "date",
		"mtime", "ctime", "atime", "expires", "deadline", "started", "finished", "completed":
		return true
	}
	for _, suffix := range []string{"_at", "_at_ms", "_at_us", "_at_ns", "_at_s", "At", "AtMs", "_unix", "_unix_ms", "_unix_us", "_unix_ns", "_unix_s", "Unix", "UnixMs", "_time", "Time", "_timestamp", "Timestamp", "_ts", "_date", "Date",
		// kebab-case, as in headers and metadata keys
		// (x-codex-ws-stream-request-start-ms), and a start or end
		// in milliseconds
		"-at", "-at-ms", "-time", "-timestamp", "-ts", "-date", "-start-ms", "-end-ms", "_start_ms", "_end_ms", "StartMs", "EndMs"} {
		if strings.HasSuffix(key, suffix) {
			return true
		}
	}
	return false
}

// usageKey reports whether a folded key holds a token usage report.
func usageKey(folded string) bool {
	return folded == "usage" || folded == "usagemetadata" || folded == "tokenusage"
}

// isTime reports whether v is a point in time: a number or numeric string
// of epoch seconds, milliseconds, microseconds or nanoseconds since 2001,
// or a string in one of the usual date-time layouts. Other numbers in
// time-like members, such as 0 or a count, stay.
func isTime(v any) bool {
	var s string
	switch x := v.(type) {
	case json.Number:
		s = string(x)
	case string:
		s = strings.TrimSpace(x)
	default:
		return false
	}
	if f, err := strconv.ParseFloat(s, 64); err == nil {
		for _, lo := range []float64{1e9, 1e12, 1e15, 1e18} {
			if lo <= f && f < 10*lo {
				return true
			}
		}
		return false
	}
	if _, ok := v.(string); !ok {
		return false
	}
	for _, layout := range timeLayouts {
		if _, err := time.Parse(layout, s); err == nil {
			return true
		}
	}
	return false
}

var timeLayouts = []string{
	time.RFC3339, "2006-01-02T15:04:05", "2006-01-02 15:04:05Z07:00", "2006-01-02 15:04:05",
	"2006-01-02 15:04:05 -0700", "2006-01-02 15:04:05 -0700 MST", "2006-01-02",
	time.RFC1123, time.RFC1123Z, time.RFC850, time.ANSIC, time.UnixDate,
}

// isDuration reports whether v, the value of a duration member, is a
// duration: any number, a duration string ("1.5s", "12ms", "1m2s",
// "00:00:01.2", "PT1.2S", "3 seconds"), or a Rust-style {"secs", "nanos"}
// object.
func isDuration(v any) bool {
	switch x := v.(type) {
	case json.Number:
		return true
	case string:
		return durationLiteral.MatchString(strings.TrimSpace(x))
	case map[string]any:
		if len(x) == 0 {
			return false
		}
		for k, e := range x {
			if _, ok := e.(json.Number); !ok {
				return false
			}
			switch k {
			case "secs", "seconds", "nanos", "nanoseconds", "millis":
			default:
				return false
			}
		}
		return true
	}
	return false
}

// isInteger reports whether v is an integer or a string of digits, as a
// process id is.
func isInteger(v any) bool {
	var s string
	switch x := v.(type) {
	case json.Number:
		s = string(x)
	case string:
		s = x
	default:
		return false
	}
	_, err := strconv.ParseUint(s, 10, 64)
	return err == nil
}

// replaceTimes rewrites the date-times in s to <time>: RFC 3339, and the
// same with a space for the T or without a zone, as logs print them. They
// are not numbered: whether two events share a second is up to the clock,
// and numbering would turn that into a difference.
func replaceTimes(s string) string {
	if !strings.Contains(s, ":") || !strings.Contains(s, "-") {
		return s
	}
	return scanWords(s, func(i int) (int, int, string, bool) {
		end := timeAt(s, i)
		return i, end, "<time>", end > 0 && bounded(s, i, end)
	})
}

// timeAt returns the end of the date-time at s[i:], or 0.
func timeAt(s string, i int) int {
	// 2006-01-02T15:04:05
	const layout = "dddd-dd-ddTdd:dd:dd"
	if len(s)-i < len(layout) {
		return 0
	}
	for k := 0; k < len(layout); k++ {
		c := s[i+k]
		switch layout[k] {
		case 'd':
			if !isDigit(c) {
				return 0
			}
		case 'T':
			if c != 'T' && c != 't' && c != ' ' {
				return 0
			}
		default:
			if c != layout[k] {
				return 0
			}
		}
	}
	j := i + len(layout)
	if j+1 < len(s) && (s[j] == '.' || s[j] == ',') && isDigit(s[j+1]) {
		j += 2
		for j < len(s) && isDigit(s[j]) {
			j++
		}
	}
	switch {
	case j < len(s) && (s[j] == 'Z' || s[j] == 'z'):
		j++
	case j+2 < len(s) && (s[j] == '+' || s[j] == '-') && isDigit(s[j+1]) && isDigit(s[j+2]):
		j += 3
		switch {
		case j+2 < len(s) && s[j] == ':' && isDigit(s[j+1]) && isDigit(s[j+2]):
			j += 3
		case j+1 < len(s) && isDigit(s[j]) && isDigit(s[j+1]):
			j += 2
		}
	}
	return j
}

const (
	month   = `(?:Jan(?:uary)?|Feb(?:ruary)?|Mar(?:ch)?|Apr(?:il)?|May|June?|July?|Aug(?:ust)?|Sep(?:t(?:ember)?)?|Oct(?:ober)?|Nov(?:ember)?|Dec(?:ember)?)`
	weekday = `(?:Mon(?:day)?|Tue(?:s(?:day)?)?|Wed(?:nesday)?|Thu(?:r(?:s(?:day)?)?)?|Fri(?:day)?|Sat(?:urday)?|Sun(?:day)?)`
	ordinal = `[0-9]{1,2}(?:st|nd|rd|th)?`
)

// dateAt matches, at the start of its input, the dates agents write into
// system prompts: 2026-11-29, 2026/11/29, 11/29/2026, Saturday, November
// 29, 2026, Sat Nov 29 2026, 29 November 2026.
var dateAt = regexp.MustCompile(`^(?:(?:` + weekday + `,?\s+)?(?:` +
	month + `\.?\s+` + ordinal + `,?\s+[0-9]{4}` +
	`|` + ordinal + `\s+(?:of\s+)?` + month + `\.?,?\s+[0-9]{4})` +
	`|[0-9]{4}[-/][0-9]{2}[-/][0-9]{2}|[0-9]{1,2}/[0-9]{1,2}/[0-9]{4})`)

// replaceDates rewrites dates in the text of an LLM request to <date>:
// agents put today's date into their system prompts ("Today's date is
// 2026-11-29", "Current date: Saturday, November 29, 2026").
func replaceDates(s string) string {
	if !strings.ContainsAny(s, "0123456789") {
		return s
	}
	digits := nextDigitFinder(s)
	return scanWords(s, func(i int) (int, int, string, bool) {
		if !isDigit(s[i]) && strings.IndexByte("JFMASONDTW", s[i]) < 0 || digits(i) >= i+window {
			return 0, 0, "", false
		}
		m := dateAt.FindStringIndex(s[i:min(len(s), i+window)])
		if m == nil {
			return 0, 0, "", false
		}
		return i, i + m[1], "<date>", bounded(s, i, i+m[1])
	})
}

// nextDigitFinder returns a function giving the index of the first digit
// of s at or after i (len(s) if none), for non-decreasing i, in amortized
// constant time: every date and duration pattern holds a digit within the
// window, so words with no digit near them skip the regexp. Prompts are
// mostly such words, and requests carry whole conversations.
func nextDigitFinder(s string) func(i int) int {
	next := -1
	return func(i int) int {
		if next < i {
			j := strings.IndexAny(s[i:], "0123456789")
			if j < 0 {
				next = len(s)
			} else {
				next = i + j
			}
		}
		return next
	}
}

// window bounds the text an anchored pattern looks at. It is longer than
// any date or duration phrase those patterns match; a match cut short by
// it is rejected by the word boundary check.
const window = 64

const durationText = `(?:[0-9]+h)?(?:[0-9]+m)?[0-9]+(?:\.[0-9]+)?(?:ns|us|µs|ms|s)` +
	`|[0-9]+(?:\.[0-9]+)?\s*(?:nanoseconds?|microseconds?|milliseconds?|seconds?|secs?|minutes?|mins?|hours?|hrs?|ns|us|µs|ms|s|m|h)` +
	`|[0-9]+:[0-9]{2}(?::[0-9]{2})?(?:\.[0-9]+)?`

var durationLiteral = regexp.MustCompile(`^(?i:` + durationText + `|[0-9]+(?:\.[0-9]+)?|PT(?:[0-9]+H)?(?:[0-9]+M)?(?:[0-9]+(?:\.[0-9]+)?S)?)$`)

// durationAt matches, at the start of its input, a duration after a word
// that says it is one, as in "Wall time: 0.51 seconds" (Codex's tool
// output) or "took 12ms"; group 1 is the duration.
var durationAt = regexp.MustCompile(`(?i)^(?:wall[ _-]?time|wall[ _-]?clock(?: time)?|cpu[ _-]?time|elapsed(?: time)?|duration|took|time taken|completed in|finished in|ran for)(?:\s*[:=]\s*|\s+)(` + durationText + `)`)

// replaceDurations rewrites the durations of duration phrases to
// <duration>, keeping the words.
func replaceDurations(s string) string {
	if !strings.ContainsAny(s, "0123456789") {
		return s
	}
	digits := nextDigitFinder(s)
	return scanWords(s, func(i int) (int, int, string, bool) {
		if i > 0 && s[i-1] == '_' || strings.IndexByte("wcedtfrWCEDTFR", s[i]) < 0 || digits(i) >= i+window {
			return 0, 0, "", false
		}
		m := durationAt.FindStringSubmatchIndex(s[i:min(len(s), i+window)])
		if m == nil {
			return 0, 0, "", false
		}
		return i + m[2], i + m[3], "<duration>", bounded(s, i+m[2], i+m[3])
	})
}

// pidAt matches, at the start of its input, a process id after a word
// that says it is one, as in "Process Group PGID: 6726" (the shell tool
// output of gemini-cli and qwen-code) or "pid=4242"; group 1 is the id.
var pidAt = regexp.MustCompile(`(?i)^(?:pgid|ppid|pid|process[ _-]?id)(?:\s*[:=]\s*|\s+)([0-9]+)`)

// replacePIDs rewrites the ids of process id phrases to <pid>, keeping
// the words, as the members named pid are.
func replacePIDs(s string) string {
	if !strings.ContainsAny(s, "0123456789") {
		return s
	}
	digits := nextDigitFinder(s)
	return scanWords(s, func(i int) (int, int, string, bool) {
		if i > 0 && s[i-1] == '_' || strings.IndexByte("pP", s[i]) < 0 || digits(i) >= i+window {
			return 0, 0, "", false
		}
		m := pidAt.FindStringSubmatchIndex(s[i:min(len(s), i+window)])
		if m == nil {
			return 0, 0, "", false
		}
		return i + m[2], i + m[3], "<pid>", bounded(s, i+m[2], i+m[3])
	})
}

// replaceIDs rewrites UUIDs to <uuid:N>, and the prefixed random ids of
// agents and LLM APIs (ses_…, msg_…, call_…, resp_…, toolu_…,
// chatcmpl-…) to <id:N>, or to the placeholder the same value got before.
func (n *Normalizer) replaceIDs(s string) string {
	if !strings.ContainsAny(s, "-_") {
		return s
	}
	return scanWords(s, func(i int) (int, int, string, bool) {
		if end := uuidAt(s, i); end > 0 {
			return i, end, n.link("uuid", valueKey(s[i:end])), true
		}
		if end := prefixedAt(s, i); end > 0 {
			return i, end, n.link("id", valueKey(s[i:end])), true
		}
		return 0, 0, "", false
	})
}

// uuidAt returns the end of the UUID at s[i:] that no letter or digit
// follows, or 0.
func uuidAt(s string, i int) int {
	const layout = "xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx"
	end := i + len(layout)
	if end > len(s) || end < len(s) && isAlnum(s[end]) {
		return 0
	}
	for k := 0; k < len(layout); k++ {
		c := s[i+k]
		if layout[k] == '-' && c != '-' || layout[k] == 'x' && !isHex(c) {
			return 0
		}
	}
	return end
}

// idPrefixes are the prefixes of random ids: OpenCode's ses_, msg_, prt_
// and per_, OpenAI's resp_, msg_, fc_, rs_, ctc_ and call_, Anthropic's
// msg_, toolu_ and srvtoolu_, and more.
var idPrefixes = map[string]bool{
	"ses": true, "msg": true, "prt": true, "per": true, "call": true, "resp": true, "fc": true, "rs": true,
	"toolu": true, "srvtoolu": true, "ctc": true, "item": true, "run": true, "req": true, "conv": true,
	"turn": true, "thread": true, "evt": true, "file": true,
}

// prefixedAt returns the end of the prefixed id at s[i:], or 0. The part
// after the prefix must look random, so that words such as call_function
// and msg_summarizer stay: random base-62 ids of eight or more characters
// almost always have a digit or mixed case.
func prefixedAt(s string, i int) int {
	if i > 0 && s[i-1] == '_' {
		return 0
	}
	j := i
	for j < len(s) && 'a' <= s[j] && s[j] <= 'z' {
		j++
	}
	if j+1 >= len(s) {
		return 0
	}
	word, sep := s[i:j], s[j]
	if !(sep == '_' && idPrefixes[word] || sep == '-' && word == "chatcmpl") {
		return 0
	}
	k := j + 1
	for k < len(s) && isAlnum(s[k]) {
		k++
	}
	if k-(j+1) < 8 || !random(s[j+1:k]) {
		return 0
	}
	return k
}

func random(s string) bool {
	var digit, upper, lower bool
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case '0' <= c && c <= '9':
			digit = true
		case 'A' <= c && c <= 'Z':
			upper = true
		default:
			lower = true
		}
	}
	return digit || upper && lower
}

// bounded reports whether s[lo:hi] is neither preceded nor followed by a
// letter or digit, so that a pattern matches whole words only.
func bounded(s string, lo, hi int) bool {
	return (lo == 0 || !isAlnum(s[lo-1])) && (hi == len(s) || !isAlnum(s[hi]))
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

func isHex(c byte) bool { return isDigit(c) || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F' }

// scanWords rewrites s at the places where words start (where a letter or
// digit follows anything else). At each, at returns the span to replace,
// which starts there or later, and its replacement, or false. Finding the
// candidates by hand and matching each with a short pattern keeps the
// cost linear and low on megabytes of tool output, where a regular
// expression over the whole text is slow.
func scanWords(s string, at func(i int) (lo, hi int, repl string, ok bool)) string {
	var b strings.Builder
	last := 0
	for i := 0; i < len(s); i++ {
		if !isAlnum(s[i]) || i > 0 && isAlnum(s[i-1]) {
			continue
		}
		lo, hi, repl, ok := at(i)
		if !ok {
			continue
		}
		b.WriteString(s[last:lo])
		b.WriteString(repl)
		last = hi
		i = hi - 1
	}
	if last == 0 {
		return s
	}
	b.WriteString(s[last:])
	return b.String()
}
