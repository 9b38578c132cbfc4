package redact

import (
	"regexp"
	"strings"
)

// Argv returns a copy of an agent's command line with the keys given on
// it masked, for the recording's metadata: the value of a flag whose name
// says secret (--api-key VALUE, --token=VALUE, by SecretMember), of a
// NAME=VALUE argument whose name does (as env(1) takes them), of a header
// given as NAME: VALUE (as curl -H takes them), the secret members of an
// argument that is JSON, and any secret value of r anywhere. argv[0], the program, is kept.
func (r *Redactor) Argv(argv []string) []string {
	if argv == nil {
		return nil
	}
	out := make([]string, len(argv))
	copy(out, argv)
	for i := 1; i < len(out); i++ {
		a := out[i]
		name, value, hasValue := strings.Cut(a, "=")
		flag := strings.HasPrefix(name, "-")
		bare := strings.TrimLeft(name, "-")
		switch {
		case hasValue && value != "" && (SecretMember(bare) || !flag && SecretName(bare)):
			out[i] = name + "=" + Mask
		case flag && !hasValue && SecretMember(bare) && i+1 < len(out) && !strings.HasPrefix(out[i+1], "-"):
			// The value is the next argument.
			out[i] = r.String(a)
			i++
			out[i] = Mask
		case !flag && !hasValue && headerLike(a):
			// A header given as an argument, as curl -H takes one.
			name, _, _ := strings.Cut(a, ":")
			out[i] = name + ": " + Mask
		default:
			// JSON given as an argument (a config) has its secret
			// members masked as a frame's are.
			out[i] = r.String(string(Members([]byte(a))))
		}
	}
	return out
}

// headerLike reports whether a is NAME: VALUE with a name of a header that
// carries a credential.
func headerLike(a string) bool {
	name, value, ok := strings.Cut(a, ":")
	return ok && strings.TrimSpace(value) != "" && name != "" && !strings.ContainsAny(name, " \t/") && isSecretHeader(name)
}

// urlUserinfo matches the user information of URLs in text, up to its @.
var urlUserinfo = regexp.MustCompile(`([A-Za-z][A-Za-z0-9+.-]*://)[^/?#\s@"'<>]*@`)

// queryParam matches a query parameter in text, its name and its value.
var queryParam = regexp.MustCompile(`([?&;])([^=&?#\s"'<>]+)=([^&#\s"'<>]*)`)

// Text returns s, a free text such as an error message, with the
// credentials of the URLs in it masked (user information, and the values
// of credential query parameters) and r's secret values masked anywhere.
// It is for texts acptap stores, such as the error of an agent that could
// not run, which may quote a URL the user gave.
func (r *Redactor) Text(s string) string {
	if strings.Contains(s, "://") {
		s = urlUserinfo.ReplaceAllString(s, "${1}"+Mask+"@")
	}
	if strings.ContainsAny(s, "?&;") {
		s = queryParam.ReplaceAllStringFunc(s, func(m string) string {
			sub := queryParam.FindStringSubmatch(m)
			if sub[3] == "" || !isSecretQueryKey(sub[2]) {
				return m
			}
			// Punctuation after the value is the text's, as in
			// "GET http://h/p?key=K: refused".
			value := strings.TrimRight(sub[3], ":,.;)")
			return sub[1] + sub[2] + "=" + Mask + sub[3][len(value):]
		})
	}
	return r.String(s)
}
