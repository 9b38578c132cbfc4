package replay

import (
	"cmp"
	"fmt"
	"maps"
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
	sb, err := makeDirs(workspaceName(rec), recordedWorkspace(rec), rec.meta.Home, workspace, archive)
	if err != nil {
		return nil, err
	}
	if sb.env, err = sandboxEnv(rec.meta, sb, sb.pathMap(rec), extraEnv); err != nil {
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

// recordedWorkspace returns the recorded workspace whose name
// workspaceName gives, or "".
func recordedWorkspace(rec *recording) string {
	for _, dir := range append(slices.Clone(rec.cwds), rec.meta.Cwd) {
		if name := filepath.Base(dir); dir != "" && name != "." && name != ".." && name != string(filepath.Separator) {
			return dir
		}
	}
	return ""
}

// sandboxLayout returns the sandbox's workspace and HOME below root: work/name
// and home; or, where the recorded workspace recWork and HOME recHome are
// both absolute and the workspace is neither HOME nor above it, the two
// placed below work/ as they were relative to each other, each at its
// path from their deepest common directory (/home/me/proj and /home/me
// become work/proj and work; /x/s/ws and /x/s/home, work/ws and
// work/home), since an agent may name a file of HOME by its path from the
// workspace (qwen-code's "../home/.qwen/output-language.md" in its system
// prompt), which no path normalization sees.
func sandboxLayout(root, name, recWork, recHome string) (work, home string) {
	work, home = filepath.Join(root, "work", name), filepath.Join(root, "home")
	if !filepath.IsAbs(recWork) || !filepath.IsAbs(recHome) {
		return work, home
	}
	recWork, recHome = filepath.Clean(recWork), filepath.Clean(recHome)
	common := recHome
	for !within(recWork, common) {
		common = filepath.Dir(common)
	}
	w, err1 := filepath.Rel(common, recWork)
	h, err2 := filepath.Rel(common, recHome)
	if err1 != nil || err2 != nil || w == "." || filepath.Base(recWork) != name {
		return work, home
	}
	return filepath.Join(root, "work", w), filepath.Join(root, "work", h)
}

// within reports whether path is dir or below it.
func within(path, dir string) bool {
	return path == dir || dir == string(filepath.Separator) || strings.HasPrefix(path, dir+string(filepath.Separator))
}

// makeDirs makes the sandbox's directories (see layout), its workspace a
// copy of the directory seed, else the snapshot archive restored, else
// empty.
func makeDirs(name, recWork, recHome, seed string, archive []byte) (*sandbox, error) {
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
	sb := &sandbox{root: root, tmp: filepath.Join(root, "tmp")}
	sb.work, sb.home = sandboxLayout(root, name, recWork, recHome)
	for _, d := range []struct {
		path string
		perm os.FileMode
	}{{filepath.Dir(sb.work), 0o755}, {sb.home, 0o700}, {sb.tmp, 0o700}} {
		if err := os.MkdirAll(d.path, d.perm); err != nil {
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
// agent, with LC_*: for a recording of an older acptap, everything else is
// dropped unless Options.Env adds it; for one that kept its environment,
// they are passed if it had them (see shapedEnv).
var allowedEnv = []string{"PATH", "LANG", "LANGUAGE", "TERM", "TZ", "USER", "LOGNAME", "SHELL", "GORACE"}

// alwaysLive are the variables of allowedEnv passed whether or not the
// recording had them: PATH finds the agent and its tools, and GORACE
// tells a race-built agent how to report.
var alwaysLive = []string{"PATH", "GORACE"}

// proxyVars point the agent at a forward proxy: a recorded one would take
// its traffic elsewhere than the replay's LLM side (or, withheld, fail to
// parse), so they are never reproduced; the replay's tap sets its own as
// the recording's did (proxy.Env), or none. The tap's other variables
// (NO_PROXY, the CA bundles, a recording's base-URL variables) it sets
// over the recorded values too; without the forward proxy (record
// --no-proxy-env) NO_PROXY and the CA bundles are the user's, reproduced
// as any other variable.
var proxyVars = []string{"HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy"}

// hookVars load code or settings from a file into every program of their
// kind that starts. A recorded value that names a file under the recorded
// HOME, workspace or TMPDIR names one the sandbox lacks, and a program
// given a file that is not there fails where one given none runs: such a
// value is reproduced empty, which loads nothing.
var hookVars = []string{
	"NODE_OPTIONS", "BASH_ENV", "ENV", "PYTHONSTARTUP", "PERL5OPT", "RUBYOPT",
	"JAVA_TOOL_OPTIONS", "_JAVA_OPTIONS", "JDK_JAVA_OPTIONS", "LD_PRELOAD", "DYLD_INSERT_LIBRARIES",
}

// runtimeDirs hold the sockets of the recording machine's running
// services (its session bus, its key agents): a recorded value naming one
// would let the replayed agent reach them, and is replaced.
var runtimeDirs = []string{"/run", "/var/run"}

// sandboxEnv builds the agent's environment but for the LLM side's
// variables, extra (K=V pairs) last, winning: for a recording that kept
// its environment, one of the same shape (shapedEnv); for an older one,
// the allowlist of acptap's own, the sandbox's HOME and TMPDIR and dummies
// for the recorded API keys. paths maps the recorded directories to the
// sandbox's (sandbox.pathMap).
func sandboxEnv(meta store.Recording, sb *sandbox, paths map[string]string, extra []string) ([]string, error) {
	var env []string
	if meta.Env != nil {
		env = shapedEnv(meta, sb, paths)
	} else {
		env = allowlistEnv(meta, sb)
	}
	for _, kv := range extra {
		if !strings.Contains(kv, "=") {
			return nil, fmt.Errorf("%w: %q (want K=V)", ErrEnv, kv)
		}
		env = append(env, kv)
	}
	return dedupeEnv(env), nil
}

// allowlistEnv is the environment of a replay of a recording that kept
// only its variables' names: the allowlist of acptap's own, the sandbox's
// HOME and TMPDIR, and dummies for the recorded API keys.
func allowlistEnv(meta store.Recording, sb *sandbox) []string {
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
	return env
}

// shapedEnv is the environment of a replay of a recording that kept its
// environment (store.Recording.Env): the recorded variables, so that an
// agent that shows its environment to its LLM (the names of all its
// variables in its system prompt) asks as it asked when recorded, each
// with its value as reproduce makes it, but for a proxy's (proxyVars) and
// the recorded base-URL variables, which the replay's tap sets; then the
// allowlist's live values, of the variables the recording had and of
// alwaysLive; the sandbox's HOME, and its TMPDIR if the recording had
// one (else the agent uses the system's, as it did).
func shapedEnv(meta store.Recording, sb *sandbox, paths map[string]string) []string {
	had := map[string]bool{}
	var env []string
	for _, v := range meta.Env {
		had[v.Name] = true
		_, baseURL := meta.BaseURLs[v.Name]
		if baseURL || slices.Contains(proxyVars, v.Name) || v.Name == "HOME" || v.Name == "TMPDIR" {
			continue
		}
		env = append(env, v.Name+"="+reproduce(v, sb, paths))
	}
	for _, k := range allowedEnv {
		if v, ok := os.LookupEnv(k); ok && (had[k] || slices.Contains(alwaysLive, k)) {
			env = append(env, k+"="+v)
		}
	}
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); strings.HasPrefix(k, "LC_") && had[k] {
			env = append(env, kv)
		}
	}
	env = append(env, "HOME="+sb.home)
	if had["TMPDIR"] {
		env = append(env, "TMPDIR="+sb.tmp)
	}
	return env
}

// reproduce is the value a replay gives the recorded variable v: a dummy
// for an API key, as the recording's is masked; a placeholder for another
// withheld value; the recorded value with the recorded directories in it
// made the sandbox's, except a hook's (hookVars) that named one, which is
// empty, and one naming a runtime directory (runtimeDirs), which is a
// placeholder.
//
// A value that named a directory when recording (store.EnvVar.Dir) names
// one in the replay too: the sandbox's is made, and a path outside the
// sandbox that this machine lacks becomes a placeholder, made.
func reproduce(v store.EnvVar, sb *sandbox, paths map[string]string) string {
	if v.Withheld != "" {
		if redact.SecretName(v.Name) && looksLikeAPIKey(v.Name) {
			return dummyKey
		}
		return sb.dirIf(v.Dir, placeholder(sb, v.Name))
	}
	value, moved := mapPaths(v.Value, paths)
	switch {
	case moved && slices.Contains(hookVars, v.Name):
		return ""
	case slices.ContainsFunc(runtimeDirs, func(dir string) bool { return containsDir(v.Value, dir) }):
		return sb.dirIf(v.Dir, placeholder(sb, v.Name))
	case v.Dir && moved:
		return sb.dirIf(true, value)
	case v.Dir:
		if fi, err := os.Stat(value); err != nil || !fi.IsDir() {
			return sb.dirIf(true, placeholder(sb, v.Name))
		}
	}
	return value
}

// dirIf makes the directory path if dir is set and path is in the
// sandbox (never outside), and returns path.
func (sb *sandbox) dirIf(dir bool, path string) string {
	if dir && (path == sb.root || strings.HasPrefix(path, sb.root+string(filepath.Separator))) {
		os.MkdirAll(path, 0o700)
	}
	return path
}

// placeholder is the value of a variable whose recorded value a replay
// does not have or does not reproduce: a path in the sandbox's TMPDIR that
// does not exist, named after the variable, so that a program taking it
// for a directory or a socket finds nothing and makes nothing outside the
// sandbox, a program taking it for a string gets the same one in every
// replay once paths are normalized, and a secret's (8 characters or more)
// is masked by name in the live requests as the recorded one was.
func placeholder(sb *sandbox, name string) string {
	return filepath.Join(sb.tmp, "acptap-env-"+strings.Map(func(r rune) rune {
		if r == '/' || r == filepath.Separator {
			return '_'
		}
		return r
	}, name))
}

// mapPaths returns value with each recorded directory of paths in it (as
// a whole path element: /home/me in /home/me/go, not in /home/meg)
// replaced by the sandbox's, the longest first, and whether any was.
func mapPaths(value string, paths map[string]string) (string, bool) {
	dirs := slices.Collect(maps.Keys(paths))
	// The longest first, so that the workspace under the recorded HOME
	// becomes the sandbox's workspace, not a path under its HOME.
	slices.SortFunc(dirs, func(a, b string) int { return cmp.Or(len(b)-len(a), strings.Compare(a, b)) })
	var out strings.Builder
	moved := false
	for i := 0; i < len(value); {
		if i == 0 || !pathByte(value[i-1]) {
			if j := slices.IndexFunc(dirs, func(d string) bool { return atDir(value[i:], d) }); j >= 0 {
				out.WriteString(paths[dirs[j]])
				i += len(dirs[j])
				moved = true
				continue
			}
		}
		out.WriteByte(value[i])
		i++
	}
	return out.String(), moved
}

// containsDir reports whether value has the directory dir in it, or a
// path under it, as a whole path element.
func containsDir(value, dir string) bool {
	for i := 0; i < len(value); i++ {
		if (i == 0 || !pathByte(value[i-1])) && atDir(value[i:], dir) {
			return true
		}
	}
	return false
}

// atDir reports whether s begins with the directory dir, followed by the
// end, a path under it, or something that is not a path's.
func atDir(s, dir string) bool {
	rest, ok := strings.CutPrefix(s, dir)
	return ok && dir != "" && (rest == "" || !pathByte(rest[0]))
}

// pathByte reports whether c may be part of a file's name next to a
// directory's, so that a directory found next to it is part of another
// name.
func pathByte(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '-' || c == '~'
}

// looksLikeAPIKey picks, among secret-looking names, the credentials an
// agent needs to start (API keys and tokens), not passwords of unrelated
// tools.
func looksLikeAPIKey(name string) bool {
	u := strings.ToUpper(name)
	return strings.Contains(u, "API_KEY") || strings.HasSuffix(u, "_KEY") || strings.HasSuffix(u, "_TOKEN")
}
