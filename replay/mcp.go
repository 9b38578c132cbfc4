package replay

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/acptap/acptap/internal/mcpconf"
	"github.com/acptap/acptap/replay/mcpstandin"
	"github.com/acptap/acptap/store"
)

// mcpStandIns are the stand-ins of a replay's stdio MCP servers (package
// mcpstandin): their plans in the sandbox, where their logs go, and the
// rewrite of the editor's frames that starts them in the servers' place.
type mcpStandIns struct {
	program string
	live    bool // the stand-ins run the servers and compare (Options.LiveMCP)
	dir     string
	plans   []*mcpstandin.Plan // by the server's index in the recording
	// next is how many stdio servers the rewrite has seen: the editor's
	// frames name them in the order record numbered them. Only the
	// driver's writes use it.
	next int
}

// standIns writes the plans of rec's MCP servers into the sandbox, for
// the stand-in program; nil if rec has none or program is "".
func (rec *recording) standIns(sb *sandbox, program string, live bool, faults []MCPFault) (*mcpStandIns, error) {
	for _, f := range faults {
		if !slices.ContainsFunc(rec.meta.MCPServers, func(s store.MCPServer) bool { return s.Name == f.Server }) {
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
		if program == "" {
			return nil, fmt.Errorf("%w: --fault mcp:%s: the MCP servers are not served from the recording", ErrMCPFault, f.Server)
		}
	}
	if program == "" || len(rec.meta.MCPServers) == 0 {
		return nil, nil
	}
	m := &mcpStandIns{program: program, live: live, dir: filepath.Join(sb.root, "mcp")}
	if err := os.MkdirAll(m.dir, 0o700); err != nil {
		return nil, fmt.Errorf("%w: the MCP servers' plans: %v", ErrSpool, err)
	}
	for i, server := range rec.meta.MCPServers {
		p := &mcpstandin.Plan{
			Server: server.Name,
			Cwd:    nonEmpty(append(slices.Clone(rec.cwds), rec.meta.Cwd, sb.work)...),
			Home:   nonEmpty(rec.meta.Home, sb.home),
			Tmp:    nonEmpty(rec.meta.Tmp, sb.tmp),
		}
		for _, f := range faults {
			if f.Server == server.Name {
				p.Faults = append(p.Faults, f.Fault)
			}
		}
		if i < len(rec.mcp) {
			p.Lines = rec.mcp[i]
		}
		if err := mcpstandin.WritePlan(filepath.Join(m.dir, mcpstandin.PlanName(i)), p); err != nil {
			return nil, fmt.Errorf("%w: the MCP servers' plans: %v", ErrSpool, err)
		}
		m.plans = append(m.plans, p)
	}
	return m, nil
}

// rewrite returns the rewrite of the editor's frames that has the agent
// start a stand-in in place of each recorded stdio MCP server; nil for
// none.
func (m *mcpStandIns) rewrite() func([]byte) []byte {
	if m == nil {
		return nil
	}
	return func(frame []byte) []byte {
		return mcpconf.Rewrite(frame, func(_ string, argv []string) ([]string, bool) {
			i := m.next
			m.next++
			if i >= len(m.plans) {
				return nil, false
			}
			standIn := []string{m.program, mcpstandin.Command, filepath.Join(m.dir, mcpstandin.PlanName(i)), filepath.Join(m.dir, mcpstandin.LogName(i))}
			if m.live {
				standIn = append(append(standIn, "--"), argv...)
			}
			return standIn, true
		})
	}
}

// reports reads what each server's stand-ins saw, once the agent is done.
func (m *mcpStandIns) reports() ([]mcpstandin.Report, error) {
	if m == nil {
		return nil, nil
	}
	var out []mcpstandin.Report
	for i, p := range m.plans {
		r, err := mcpstandin.Read(p, filepath.Join(m.dir, mcpstandin.LogName(i)))
		if err != nil {
			return nil, fmt.Errorf("%w: the MCP stand-ins' log: %v", ErrSpool, err)
		}
		out = append(out, r)
	}
	return out, nil
}
