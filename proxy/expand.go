package proxy

import "strings"

// ExpandBaseURLs returns argv with ${VAR} replaced by urls[VAR] in every
// argument, for agents that take their base URL from a command-line
// option rather than from the environment, such as Codex's
// -c model_providers.NAME={base_url="..."}. Only the variables of urls
// are expanded; anything else, $VAR without braces included, stays as
// written. argv is not changed.
func ExpandBaseURLs(argv []string, urls map[string]string) []string {
	if len(urls) == 0 {
		return argv
	}
	pairs := make([]string, 0, 2*len(urls))
	for v, u := range urls {
		pairs = append(pairs, "${"+v+"}", u)
	}
	r := strings.NewReplacer(pairs...)
	out := make([]string, len(argv))
	for i, a := range argv {
		out[i] = r.Replace(a)
	}
	return out
}
