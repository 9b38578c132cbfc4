package replay

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/acptap/acptap/internal/mcpconf"
	"github.com/acptap/acptap/normalize"
	"github.com/acptap/acptap/proxy"
	"github.com/acptap/acptap/replay/mcpstandin"
	"github.com/acptap/acptap/store"
)

// mcpStandIns are the stand-ins of a replay's MCP servers (package
// mcpstandin), by the server's index in the recording: for a stdio
// server its plan in the sandbox, for the agent to start in the server's
// place, and where its log goes; for an HTTP or SSE server a stand-in
// serving it on a loopback port; and the rewrite of the editor's frames
// that has the agent reach them.
type mcpStandIns struct {
	program string // the stdio stand-ins' program; "" to leave stdio servers alone
	live    bool   // the stand-ins pass the real servers' answers on, compared (Options.LiveMCP)
	dir     string
	servers []store.MCPServer         // the recording's
	plans   []*mcpstandin.Plan        // by index; nil for a server left alone
	http    []*mcpstandin.HTTPStandIn // by index, for HTTP and SSE servers
	logs    []*os.File                // the HTTP stand-ins' logs, by index

	mu sync.Mutex // guards next
	// next is how many servers the rewrite has seen: the editor's frames
	// name them in the order record numbered them.
	next int
}

// standInOptions are what a replay's options say of its MCP stand-ins.
type standInOptions struct {
	program     string // Options.MCPStandIn
	live        bool   // Options.LiveMCP
	calibrating bool   // Options.MCPCalls
	faults      []MCPFault
	rules       []normalize.Rule // the user's and the recording's
	secret      string           // the replay's tap's, which the HTTP stand-ins serve under
}

// standIns readies the stand-ins of rec's MCP servers: stdio ones' plans
// written into the sandbox, for the stand-in program (none if program is
// ""), HTTP and SSE ones started. It returns nil if rec has none.
func (rec *recording) standIns(sb *sandbox, o standInOptions) (_ *mcpStandIns, err error) {
	program, live, faults := o.program, o.live, o.faults
	for _, f := range faults {
		i := slices.IndexFunc(rec.meta.MCPServers, func(s store.MCPServer) bool { return s.Name == f.Server })
		if i < 0 {
			var names []string
			for _, s := range rec.meta.MCPServers {
				names = append(names, s.Name)
			}
			have := strings.Join(names, ", ")
			if have == "" {
				have = "none"
			}
			return nil, fmt.Errorf("%w: --fault mcp:%s: the recording has no MCP server %s (it has: %s)", ErrMCPFault, f.Server, f.Server, have)
		}
		if s := rec.meta.MCPServers[i]; s.Type == "" && program == "" || s.NotRecorded != "" {
			return nil, fmt.Errorf("%w: --fault mcp:%s: the MCP server is not served from the recording", ErrMCPFault, f.Server)
		}
	}
	if len(rec.meta.MCPServers) == 0 {
		return nil, nil
	}
	m := &mcpStandIns{program: program, live: live, dir: filepath.Join(sb.root, "mcp"), servers: rec.meta.MCPServers}
	defer func() {
		if err != nil {
			m.close()
		}
	}()
	if err := os.MkdirAll(m.dir, 0o700); err != nil {
		return nil, fmt.Errorf("%w: the MCP servers' plans: %v", ErrSpool, err)
	}
	m.plans = make([]*mcpstandin.Plan, len(m.servers))
	m.http = make([]*mcpstandin.HTTPStandIn, len(m.servers))
	m.logs = make([]*os.File, len(m.servers))
	secret := o.secret
	if secret == "" {
		secret = proxy.NewSecret()
	}
	for i, server := range m.servers {
		if server.NotRecorded != "" || server.Type == "" && program == "" {
			continue
		}
		p := &mcpstandin.Plan{
			Server: server.Name,
			Cwd:    nonEmpty(append(slices.Clone(rec.cwds), rec.meta.Cwd, sb.work)...),
			Home:   nonEmpty(rec.meta.Home, sb.home),
			Tmp:    nonEmpty(rec.meta.Tmp, sb.tmp),

			Calibrating: o.calibrating,
		}
		p.Rules = mcpRules(o.rules)
		for _, f := range faults {
			if f.Server == server.Name {
				p.Faults = append(p.Faults, f.Fault)
			}
		}
		if i < len(rec.mcp) {
			p.Lines = rec.mcp[i]
		}
		m.plans[i] = p
		if server.Type == "" {
			if err := mcpstandin.WritePlan(filepath.Join(m.dir, mcpstandin.PlanName(i)), p); err != nil {
				return nil, fmt.Errorf("%w: the MCP servers' plans: %v", ErrSpool, err)
			}
			continue
		}
		log, err := os.OpenFile(filepath.Join(m.dir, mcpstandin.LogName(i)), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
		if err != nil {
			return nil, fmt.Errorf("%w: the MCP stand-ins' log: %v", ErrSpool, err)
		}
		m.logs[i] = log
		opts := mcpstandin.HTTPOptions{Plan: p, Transport: server.Type, Log: log, Secret: secret}
		if i < len(rec.mcpResponses) {
			opts.Responses = rec.mcpResponses[i]
		}
		if m.http[i], err = mcpstandin.StartHTTP(opts); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// mcpRules is the rules file of rules for an mcpstandin.Plan, "" for
// none.
func mcpRules(rules []normalize.Rule) string {
	if len(rules) == 0 {
		return ""
	}
	return string(normalize.FormatRules(rules))
}

// rewrite returns the rewrite of the editor's frames that has the agent
// reach a stand-in in place of each recorded MCP server; nil for none.
func (m *mcpStandIns) rewrite() func([]byte) []byte {
	if m == nil {
		return nil
	}
	return func(frame []byte) []byte {
		return mcpconf.Rewrite(frame, func(s mcpconf.Server) (mcpconf.Server, bool) {
			m.mu.Lock()
			i := m.next
			m.next++
			m.mu.Unlock()
			if i >= len(m.plans) || m.plans[i] == nil {
				return s, false
			}
			if h := m.http[i]; h != nil {
				if m.live {
					h.SetLive(s.URL)
				}
				s.URL = h.URL(s.URL)
				return s, true
			}
			standIn := []string{m.program, mcpstandin.Command, filepath.Join(m.dir, mcpstandin.PlanName(i)), filepath.Join(m.dir, mcpstandin.LogName(i))}
			if m.live {
				standIn = append(append(standIn, "--"), s.Argv...)
			}
			s.Argv = standIn
			return s, true
		})
	}
}

// close stops the HTTP stand-ins and closes their logs.
func (m *mcpStandIns) close() {
	if m == nil {
		return
	}
	for i, h := range m.http {
		if h != nil {
			h.Close()
		}
		if m.logs[i] != nil {
			m.logs[i].Close()
		}
	}
}

// reports reads what each server's stand-ins saw, once the agent is done,
// and stops the HTTP stand-ins.
func (m *mcpStandIns) reports() ([]mcpstandin.Report, error) {
	if m == nil {
		return nil, nil
	}
	m.close()
	var out []mcpstandin.Report
	for i, p := range m.plans {
		if p == nil {
			continue
		}
		r, err := mcpstandin.Read(p, filepath.Join(m.dir, mcpstandin.LogName(i)))
		if err != nil {
			return nil, fmt.Errorf("%w: the MCP stand-ins' log: %v", ErrSpool, err)
		}
		out = append(out, r)
	}
	return out, nil
}
