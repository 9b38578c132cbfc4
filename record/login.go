package record

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"

	"github.com/acptap/acptap/internal/acp"
	"github.com/acptap/acptap/store"
)

// terminalLogins returns the terminal logins an agent's answer to
// initialize advertises (authMethods of type "terminal"), or nil if the
// line is not such an answer or advertises none.
func terminalLogins(line []byte) []store.TerminalLogin {
	if !bytes.Contains(line, []byte(`"authMethods"`)) || !bytes.Contains(line, []byte(`"terminal"`)) {
		return nil // not worth decoding
	}
	m := acp.Parse(line)
	if m.Kind != acp.Response {
		return nil
	}
	var res struct {
		AuthMethods []struct {
			ID   string   `json:"id"`
			Name string   `json:"name"`
			Type string   `json:"type"`
			Args []string `json:"args"`
		} `json:"authMethods"`
	}
	if json.Unmarshal(m.Result, &res) != nil {
		return nil
	}
	var out []store.TerminalLogin
	for _, a := range res.AuthMethods {
		if a.Type == "terminal" {
			out = append(out, store.TerminalLogin{ID: a.ID, Name: a.Name, Args: a.Args})
		}
	}
	return out
}

// A TerminalLogin is a run of acptap record that is an editor's terminal
// login: the agent command of a recording of the store followed by the
// arguments of a terminal login it advertised (see
// store.Recording.TerminalLogins). Such a command is no session: it is
// run without being recorded, and the recording it came from is kept.
type TerminalLogin struct {
	Recording string // the recording whose agent advertised the login
	store.TerminalLogin
}

// String says in one line what the command is and what record does.
func (l TerminalLogin) String() string {
	method := l.ID
	if l.Name != "" {
		method = l.Name + " (" + l.ID + ")"
	}
	return "not recording: the command is the terminal login " + method + " that the agent of recording " + l.Recording +
		" advertised (its command with " + strings.Join(l.Args, " ") + "); it runs without being recorded, and " + l.Recording + " is kept"
}

// TerminalLogin reports whether the plan's command is a terminal login
// of a recording of st (see TerminalLogin): a recording being made
// counts, as an editor starts the login while the session waits.
func (p *Plan) TerminalLogin(st *store.Store) (TerminalLogin, bool, error) {
	recs, err := st.List()
	if err != nil {
		return TerminalLogin{}, false, err
	}
	argv := p.secrets.Argv(p.opts.Argv)
	for _, r := range recs {
		for _, l := range r.TerminalLogins {
			if len(r.Argv) == 0 || len(l.Args) == 0 {
				continue
			}
			// The agent's command with the login's arguments after it, or
			// in place of its own.
			if slices.Equal(argv, slices.Concat(r.Argv, l.Args)) || slices.Equal(argv, slices.Concat(r.Argv[:1], l.Args)) {
				return TerminalLogin{Recording: r.Name, TerminalLogin: l}, true, nil
			}
		}
	}
	return TerminalLogin{}, false, nil
}
