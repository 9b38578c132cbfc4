package replay

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/acptap/acptap/internal/redact"
	"github.com/acptap/acptap/internal/snapshot"
	"github.com/acptap/acptap/internal/stale"
	"github.com/acptap/acptap/store"
)

// sandbox is the agent's fresh directories and environment.
type sandbox struct {
	root, work, home, tmp string
	// env is the agent's environment before the LLM side adds its
	// variables; see sandboxEnv.
	env []string
}

// newSandbox makes the sandbox of a replay of rec: a temporary directory
// holding the workspace (a copy of the directory workspace if not empty,
// else the recording's snapshot restored if it has one, else empty), named
// as the recorded one (see workspaceName), and the agent's own HOME and
// TMPDIR, and its environment, extraEnv (K=V pairs) last. The caller
// removes it.
func newSandbox(st *store.Store, rec *recording, workspace string, extraEnv []string) (*sandbox, error) {
	var archive []byte
	if workspace == "" && rec.meta.Snapshot {
		var err error
		if archive, err = st.Blob(rec.meta.Name, store.SnapshotBlob); err != nil {
			return nil, fmt.Errorf("%w: reading the recorded workspace snapshot: %v", ErrWorkspace, err)
		}
	}
	sb, err := makeDirs(workspaceName(rec), workspace, archive)
	if err != nil {
		return nil, err
	}
	if sb.env, err = sandboxEnv(rec.meta, sb, extraEnv); err != nil {
		sb.remove()
		return nil, err
	}
	return sb, nil
}

// workspaceName returns the name of the recorded workspace: the last
// element of the first cwd the editor opened a session in, else of
// acptap's cwd when recorded, else "work". Agents derive names from it
// that no path normalization sees, such as gemini-cli's project
// directory ~/.gemini/tmp/<name>/ in its system prompt, so the replay's
// workspace bears the same name.
func workspaceName(rec *recording) string {
	for _, dir := range append(slices.Clone(rec.cwds), rec.meta.Cwd) {
		if name := filepath.Base(dir); dir != "" && name != "." && name != ".." && name != string(filepath.Separator) {
			return name
		}
	}
	return "work"
}

// makeDirs makes the sandbox's directories, its workspace, work/name, a
// copy of the directory seed, else the snapshot archive restored, else
// empty.
func makeDirs(name, seed string, archive []byte) (*sandbox, error) {
	// The sandboxes and tap files of replays killed with SIGKILL go
	// first; this one's name has this process's id for the next replay
	// to tell whether it is still needed.
	stale.Remove(os.TempDir(), stale.ReplayPrefix)
	stale.Remove(os.TempDir(), stale.TapPrefix)
	stale.Remove(os.TempDir(), stale.MCPPrefix)
	root, err := os.MkdirTemp("", stale.Dir(stale.ReplayPrefix))
	if err != nil {
		return nil, fmt.Errorf("creating the replay sandbox: %w", err)
	}
	// Resolve symlinks (macOS /var → /private/var) so that the paths the
	// agent sees are the ones normalization knows.
	if r, err := filepath.EvalSymlinks(root); err == nil {
		root = r
	}
	// The workspace is a directory of its own below work/, so that its
	// name cannot clash with home/ and tmp/.
	sb := &sandbox{root: root, work: filepath.Join(root, "work", name), home: filepath.Join(root, "home"), tmp: filepath.Join(root, "tmp")}
	for d, perm := range map[string]os.FileMode{sb.home: 0o700, sb.tmp: 0o700, filepath.Dir(sb.work): 0o755} {
		if err := os.Mkdir(d, perm); err != nil {
			sb.remove()
			return nil, fmt.Errorf("creating the replay sandbox: %w", err)
		}
	}
	from := seed
	switch {
	case seed != "":
		err = os.CopyFS(sb.work, os.DirFS(seed))
	case archive != nil:
		from = "the recorded snapshot"
		err = snapshot.Restore(archive, sb.work)
	default:
		err = os.Mkdir(sb.work, 0o755)
	}
	if err != nil {
		sb.remove()
		return nil, fmt.Errorf("%w: seeding the workspace from %s: %v", ErrWorkspace, from, err)
	}
	return sb, nil
}

func (sb *sandbox) remove() { os.RemoveAll(sb.root) }

// pathMap maps the recorded session's directories to the sandbox's: the
// cwds the editor gave session/new (an editor's project root is rarely
// acptap's own working directory), acptap's cwd, HOME and TMPDIR.
func (sb *sandbox) pathMap(rec *recording) map[string]string {
	meta := rec.meta
	m := map[string]string{}
	for _, cwd := range rec.cwds {
		m[cwd] = sb.work
	}
	if meta.Cwd != "" {
		m[meta.Cwd] = sb.work
	}
	if meta.Home != "" && meta.Home != "/" {
		m[meta.Home] = sb.home
	}
	if meta.Tmp != "" && meta.Tmp != "/" {
		m[meta.Tmp] = sb.tmp
	}
	return m
}

// dummyKey replaces API keys in the agent's environment: replay needs none
// and must not be able to use a real one.
const dummyKey = "acptap-replay-dummy-key"

// allowedEnv are the variables of acptap's environment passed to the
// agent; everything else is dropped unless Options.Env adds it.
var allowedEnv = []string{"PATH", "LANG", "LANGUAGE", "TERM", "TZ", "USER", "LOGNAME", "SHELL", "GORACE"}

// sandboxEnv builds the agent's environment but for the LLM side's
// variables: the allowlist of acptap's own, the sandbox's HOME and TMPDIR,
// dummies for the recorded secret variables, then extra, K=V pairs.
func sandboxEnv(meta store.Recording, sb *sandbox, extra []string) ([]string, error) {
	var env []string
	for _, k := range allowedEnv {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "LC_") {
			env = append(env, kv)
		}
	}
	env = append(env, "HOME="+sb.home, "TMPDIR="+sb.tmp)
	for _, k := range meta.EnvNames {
		if redact.SecretName(k) && looksLikeAPIKey(k) {
			env = append(env, k+"="+dummyKey)
		}
	}
	for _, kv := range extra {
		if !strings.Contains(kv, "=") {
			return nil, fmt.Errorf("%w: %q (want K=V)", ErrEnv, kv)
		}
		env = append(env, kv)
	}
	return env, nil
}

// looksLikeAPIKey picks, among secret-looking names, the credentials an
// agent needs to start (API keys and tokens), not passwords of unrelated
// tools.
func looksLikeAPIKey(name string) bool {
	u := strings.ToUpper(name)
	return strings.Contains(u, "API_KEY") || strings.HasSuffix(u, "_KEY") || strings.HasSuffix(u, "_TOKEN")
}
