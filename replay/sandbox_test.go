package replay

import (
	"errors"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/acptap/acptap/internal/snapshot"
	"github.com/acptap/acptap/proxy"
	"github.com/acptap/acptap/store"
)

// createWithSnapshot stores a recording named name whose snapshot is the
// directory dir.
func createWithSnapshot(t *testing.T, st *store.Store, name, dir string) {
	t.Helper()
	archive, _, err := snapshot.Take(dir, snapshot.Options{})
	if err != nil {
		t.Fatal(err)
	}
	w, err := st.Create(store.Recording{Name: name, Argv: []string{"agent"}, Snapshot: true}, false)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.PutBlob(store.SnapshotBlob, archive); err != nil {
		t.Fatal(err)
	}
	if err := w.Finish(); err != nil {
		t.Fatal(err)
	}
}

// dirWith makes a directory holding the file name with content.
func dirWith(t *testing.T, name, content string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// files returns the names of the files in dir, failing if it is missing.
func files(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

func TestSandboxWorkspace(t *testing.T) {
	st := openStore(t)
	createWithSnapshot(t, st, "snap", dirWith(t, "recorded.txt", "as recorded"))
	writeRecording(t, st, "plain")
	snap, err := load(st, "snap")
	if err != nil {
		t.Fatal(err)
	}
	defer snap.close()
	plain, err := load(st, "plain")
	if err != nil {
		t.Fatal(err)
	}
	defer plain.close()
	seed := dirWith(t, "seed.txt", "from --workspace")
	for _, tc := range []struct {
		name      string
		rec       *recording
		workspace string
		want      []string // the workspace's files
	}{
		{"the directory", plain, seed, []string{"seed.txt"}},
		{"the directory over the snapshot", snap, seed, []string{"seed.txt"}},
		{"the snapshot", snap, "", []string{"recorded.txt"}},
		{"empty", plain, "", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sb, err := newSandbox(st, tc.rec, tc.workspace, nil)
			if err != nil {
				t.Fatal(err)
			}
			if got := files(t, sb.work); !slices.Equal(got, tc.want) {
				t.Errorf("workspace files %q, want %q", got, tc.want)
			}
			for _, d := range []string{sb.home, sb.tmp} {
				if got := files(t, d); len(got) != 0 || filepath.Dir(d) != sb.root {
					t.Errorf("%s holds %q, want an empty directory in %s", d, got, sb.root)
				}
			}
			if sb.work == sb.home || sb.home == sb.tmp || filepath.Dir(filepath.Dir(sb.work)) != sb.root || filepath.Dir(sb.home) != sb.root {
				t.Errorf("sandbox directories %+v are not three of its root", sb)
			}
			sb.remove()
			if _, err := os.Stat(sb.root); !os.IsNotExist(err) {
				t.Errorf("after remove, the sandbox root: %v", err)
			}
		})
	}
	if b, err := os.ReadFile(filepath.Join(seed, "seed.txt")); err != nil || string(b) != "from --workspace" {
		t.Errorf("the seed directory changed: %q, %v", b, err)
	}
}

func TestSandboxWorkspaceErrors(t *testing.T) {
	st := openStore(t)
	// A recording that says it has a snapshot but has none.
	w, err := st.Create(store.Recording{Name: "lost", Snapshot: true}, false)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Finish(); err != nil {
		t.Fatal(err)
	}
	lost, err := load(st, "lost")
	if err != nil {
		t.Fatal(err)
	}
	defer lost.close()
	// Sandboxes are made in TMPDIR: one of the test's own shows what is
	// left.
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	for _, tc := range []struct {
		name      string
		workspace string
	}{
		{"missing snapshot", ""},
		{"missing directory", filepath.Join(t.TempDir(), "nope")},
	} {
		if sb, err := newSandbox(st, lost, tc.workspace, nil); !errors.Is(err, ErrWorkspace) {
			t.Errorf("%s: newSandbox = %+v, %v; want ErrWorkspace", tc.name, sb, err)
		}
	}
	// Nothing is left behind.
	if left := files(t, tmp); len(left) != 0 {
		t.Errorf("left in TMPDIR after the errors: %q", left)
	}
}

// A recording of an older acptap, which kept only its variables' names,
// replays with the allowlist.
func TestSandboxEnv(t *testing.T) {
	t.Setenv("LANG", "C.UTF-8")
	t.Setenv("LC_TIME", "en_GB.UTF-8")
	t.Setenv("SOME_TOOL_SETTING", "leaks") // not on the allowlist
	t.Setenv("OPENAI_API_KEY", "sk-real-0123456789")
	meta := store.Recording{EnvNames: []string{"OPENAI_API_KEY", "GITHUB_TOKEN", "DB_PASSWORD", "PATH"}}
	sb := &sandbox{home: "/sb/home", tmp: "/sb/tmp"}
	env, err := sandboxEnv(meta, sb, nil, []string{"EXTRA=1", "LANG=fr_FR.UTF-8"})
	if err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]string{
		"LANG":           "fr_FR.UTF-8", // the extra value, after the allowlist's
		"LC_TIME":        "en_GB.UTF-8",
		"PATH":           os.Getenv("PATH"),
		"HOME":           "/sb/home",
		"TMPDIR":         "/sb/tmp",
		"OPENAI_API_KEY": dummyKey, // never the real one
		"GITHUB_TOKEN":   dummyKey,
		"EXTRA":          "1",
	} {
		if got, ok := envValue(env, k); !ok || got != want {
			t.Errorf("%s=%q (set %v), want %q", k, got, ok, want)
		}
	}
	for _, k := range []string{"SOME_TOOL_SETTING", "DB_PASSWORD"} {
		if v, ok := envValue(env, k); ok {
			t.Errorf("%s=%q is in the environment, want it left out", k, v)
		}
	}
	if last := env[len(env)-1]; last != "LANG=fr_FR.UTF-8" {
		t.Errorf("the last variable is %q, want the last extra one", last)
	}
	if _, err := sandboxEnv(meta, sb, nil, []string{"NOEQUALS"}); !errors.Is(err, ErrEnv) || !strings.Contains(err.Error(), "NOEQUALS") {
		t.Errorf("sandboxEnv with NOEQUALS = %v, want ErrEnv naming it", err)
	}
}

// The workspace bears the recorded one's name: gemini-cli names its
// project directory, ~/.gemini/tmp/<name>/, after it, and says so in its
// system prompt.
func TestSandboxWorkspaceName(t *testing.T) {
	st := openStore(t)
	sessionNew := func(cwd string) []string {
		return addSessionCwd(nil, []byte(`{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"`+cwd+`","mcpServers":[]}}`))
	}
	for _, tc := range []struct {
		name string
		rec  *recording
		want string
	}{
		{"the session's cwd", &recording{meta: store.Recording{Cwd: "/rec"}, cwds: sessionNew("/rec/my-project")}, "my-project"},
		{"acptap's cwd", &recording{meta: store.Recording{Cwd: "/rec/ws"}}, "ws"},
		{"a session in /", &recording{meta: store.Recording{Cwd: "/rec/ws"}, cwds: sessionNew("/")}, "ws"},
		{"the root", &recording{meta: store.Recording{Cwd: "/"}}, "work"},
		{"no cwd", &recording{}, "work"},
		{"named as the sandbox's home", &recording{meta: store.Recording{Cwd: "/rec/home"}}, "home"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sb, err := newSandbox(st, tc.rec, "", nil)
			if err != nil {
				t.Fatal(err)
			}
			defer sb.remove()
			if got := filepath.Base(sb.work); got != tc.want {
				t.Errorf("the workspace is %s, want one named %q", sb.work, tc.want)
			}
			if fi, err := os.Stat(sb.work); err != nil || !fi.IsDir() {
				t.Errorf("the workspace %s: %v, want a directory", sb.work, err)
			}
			if sb.work == sb.home || sb.work == sb.tmp || !strings.HasPrefix(sb.work, sb.root+string(filepath.Separator)) {
				t.Errorf("sandbox directories %+v, want the workspace apart from home and tmp, in the root", sb)
			}
		})
	}
}

func TestSandboxPathMap(t *testing.T) {
	rec := &recording{
		meta: store.Recording{Cwd: "/rec", Home: "/home/u", Tmp: "/"},
		cwds: addSessionCwd(nil, []byte(`{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/rec/project","mcpServers":[]}}`)),
	}
	sb := &sandbox{work: "/sb/work", home: "/sb/home", tmp: "/sb/tmp"}
	// "/" is nobody's TMPDIR worth mapping: every path is under it.
	want := map[string]string{"/rec/project": "/sb/work", "/rec": "/sb/work", "/home/u": "/sb/home"}
	if got := sb.pathMap(rec); !maps.Equal(got, want) {
		t.Errorf("pathMap = %v, want %v", got, want)
	}
}

// A recording that kept its environment replays with one of the same
// shape: the recorded names, each with its recorded value, the sandbox's
// paths for the recorded directories, or a placeholder; the allowlist's
// live values and --env winning; the tap's variables left to the tap.
func TestSandboxEnvShaped(t *testing.T) {
	t.Setenv("LANG", "C.UTF-8")
	t.Setenv("TERM", "dumb") // not recorded: left out
	t.Setenv("LC_TIME", "en_GB.UTF-8")
	t.Setenv("LC_PAPER", "de_DE.UTF-8") // not recorded: left out
	t.Setenv("TZ", "")
	os.Unsetenv("TZ") // recorded, not live: the recorded value
	t.Setenv("OPENAI_API_KEY", "sk-real-0123456789")
	meta := store.Recording{
		Cwd: "/home/me/proj", Home: "/home/me", Tmp: "/tmp",
		BaseURLs: map[string]string{"OPENAI_BASE_URL": "https://api.openai.com/v1"},
		Env: []store.EnvVar{
			{Name: "COLOR", Value: "blue"},
			{Name: "DB_PASSWORD", Withheld: store.WithheldSecret},
			{Name: "GOPATH", Value: "/home/me/go"},
			{Name: "HOME", Value: "/home/me"},
			{Name: "HTTPS_PROXY", Value: "http://proxy.invalid:3128"},
			{Name: "INVOCATION_ID", Withheld: store.WithheldToken},
			{Name: "JAVA_TOOL_OPTIONS", Value: "-Xmx1g"},
			{Name: "LANG", Value: "en_US.UTF-8"},
			{Name: "LC_TIME", Value: "fr_FR.UTF-8"},
			{Name: "LIST", Value: "/home/me/bin:/usr/bin:/home/meg/bin"},
			{Name: "NODE_EXTRA_CA_CERTS", Value: "/etc/corp-ca.pem"},
			{Name: "NODE_OPTIONS", Value: "--require /home/me/hook.js"},
			{Name: "NO_PROXY", Value: "corp.invalid"},
			{Name: "OPENAI_API_KEY", Withheld: store.WithheldSecret},
			{Name: "OPENAI_BASE_URL", Value: "https://api.openai.com/v1"},
			{Name: "PATH", Value: "/rec/bin"},
			{Name: "PROJECT", Value: "/home/me/proj/sub"},
			{Name: "SSL_CERT_FILE", Value: "/etc/ssl/certs/ca-certificates.crt"},
			{Name: "TZ", Value: "Europe/Paris"},
			{Name: "URI", Value: "file:///tmp/x"},
			{Name: "VAR_TMP", Value: "/var/tmp"},
			{Name: "XDG_RUNTIME_DIR", Value: "/run/user/1000"},
		},
	}
	sb := &sandbox{work: "/sb/work/proj", home: "/sb/home", tmp: "/sb/tmp"}
	paths := map[string]string{"/home/me/proj": sb.work, "/home/me": sb.home, "/tmp": sb.tmp}
	env, err := sandboxEnv(meta, sb, paths, []string{"COLOR=red"})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"COLOR":             "red", // --env wins
		"DB_PASSWORD":       "/sb/tmp/acptap-env-DB_PASSWORD",
		"GOPATH":            "/sb/home/go",
		"HOME":              "/sb/home",
		"INVOCATION_ID":     "/sb/tmp/acptap-env-INVOCATION_ID",
		"JAVA_TOOL_OPTIONS": "-Xmx1g", // a hook naming no recorded directory
		"LANG":              "C.UTF-8",
		"LC_TIME":           "en_GB.UTF-8",
		"LIST":              "/sb/home/bin:/usr/bin:/home/meg/bin",
		"NODE_OPTIONS":      "", // its file is not in the sandbox
		"OPENAI_API_KEY":    dummyKey,
		"PATH":              os.Getenv("PATH"),
		"PROJECT":           "/sb/work/proj/sub",
		"TZ":                "Europe/Paris",
		"URI":               "file:///sb/tmp/x",
		"VAR_TMP":           "/var/tmp",
		"XDG_RUNTIME_DIR":   "/sb/tmp/acptap-env-XDG_RUNTIME_DIR",
		// The user's, without the forward proxy; the tap sets its own
		// over them with it.
		"NO_PROXY":            "corp.invalid",
		"SSL_CERT_FILE":       "/etc/ssl/certs/ca-certificates.crt",
		"NODE_EXTRA_CA_CERTS": "/etc/corp-ca.pem",
	}
	if gorace, ok := os.LookupEnv("GORACE"); ok {
		want["GORACE"] = gorace
	}
	got := map[string]string{}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		if _, dup := got[k]; dup {
			t.Errorf("%s is in the environment twice", k)
		}
		got[k] = v
		if strings.Contains(v, "sk-real") {
			t.Errorf("%s=%q: the live API key reached the agent", k, v)
		}
	}
	if !maps.Equal(got, want) {
		t.Errorf("the environment:\n%v\nwant\n%v", got, want)
	}

	// A recording with TMPDIR gets the sandbox's.
	meta.Env = append(meta.Env, store.EnvVar{Name: "TMPDIR", Value: "/tmp"})
	env, err = sandboxEnv(meta, sb, paths, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got, ok := envValue(env, "TMPDIR"); got != sb.tmp {
		t.Errorf("TMPDIR=%q (set %v), want %q", got, ok, sb.tmp)
	}
}

// proxyVars, which a replay never reproduces, are variables the tap sets
// for its forward proxy: a recording with the forward proxy replays with
// them all.
func TestProxyVarsAreTheTaps(t *testing.T) {
	ca, err := proxy.LoadOrCreateCA(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	tap, err := proxy.New(proxy.Config{CA: ca, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	defer tap.Close()
	env, err := tap.Env(nil, proxy.EnvOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var set []string
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		set = append(set, k)
	}
	for _, k := range proxyVars {
		if !slices.Contains(set, k) {
			t.Errorf("the tap does not set %s, which a replay never reproduces; the tap sets %q", k, set)
		}
	}
}

func TestMapPaths(t *testing.T) {
	paths := map[string]string{"/home/me": "/sb/home", "/home/me/proj": "/sb/work/proj"}
	for value, want := range map[string]string{
		"/home/me":                   "/sb/home",
		"/home/me/proj/x":            "/sb/work/proj/x",
		"/home/me/project":           "/sb/home/project",
		"/home/meg":                  "/home/meg",
		"/mnt/home/me":               "/mnt/home/me",
		"a=/home/me,b=/home/me/proj": "a=/sb/home,b=/sb/work/proj",
		"~/home/me":                  "~/home/me",
		"plain":                      "plain",
	} {
		got, moved := mapPaths(value, paths)
		if got != want || moved != (got != value) {
			t.Errorf("mapPaths(%q) = %q, %v; want %q", value, got, moved, want)
		}
	}
}

// TestSandboxEnvDirs: a variable that named a directory when recording
// names one in the replay: the sandbox's, made; a placeholder, made, for
// a directory this machine lacks or a withheld value; one that exists
// here, as it is.
func TestSandboxEnvDirs(t *testing.T) {
	root := t.TempDir()
	sb := &sandbox{root: root, work: filepath.Join(root, "work"), home: filepath.Join(root, "home"), tmp: filepath.Join(root, "tmp")}
	for _, d := range []string{sb.work, sb.home, sb.tmp} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	meta := store.Recording{Cwd: "/home/me/proj", Home: "/home/me", Env: []store.EnvVar{
		{Name: "CODEX_HOME", Value: "/home/me/.codex", Dir: true},
		{Name: "CACHE", Value: "/nonexistent/cache", Dir: true},
		{Name: "RUN_DIR", Withheld: store.WithheldToken, Dir: true},
		{Name: "SHARE", Value: "/usr", Dir: true},
		{Name: "FILE", Value: "/home/me/notes.txt"},
	}}
	env, err := sandboxEnv(meta, sb, map[string]string{"/home/me/proj": sb.work, "/home/me": sb.home}, nil)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		got[k] = v
	}
	for name, want := range map[string]string{
		"CODEX_HOME": filepath.Join(sb.home, ".codex"),
		"CACHE":      placeholder(sb, "CACHE"),
		"RUN_DIR":    placeholder(sb, "RUN_DIR"),
		"SHARE":      "/usr",
		"FILE":       filepath.Join(sb.home, "notes.txt"),
	} {
		if got[name] != want {
			t.Errorf("%s=%q, want %q", name, got[name], want)
		}
	}
	for _, name := range []string{"CODEX_HOME", "CACHE", "RUN_DIR"} {
		if fi, err := os.Stat(got[name]); err != nil || !fi.IsDir() {
			t.Errorf("%s=%s: not made a directory: %v", name, got[name], err)
		}
	}
	if _, err := os.Stat(got["FILE"]); err == nil {
		t.Errorf("FILE=%s was made; only directories are", got["FILE"])
	}
}

func TestSandboxLayout(t *testing.T) {
	for _, tc := range []struct {
		name, work, home   string
		wantWork, wantHome string
	}{
		{"the workspace in HOME", "/home/me/proj", "/home/me", "/sb/work/proj", "/sb/work"},
		{"deeper in HOME", "/home/me/src/proj", "/home/me", "/sb/work/src/proj", "/sb/work"},
		{"siblings", "/x/s/ws", "/x/s/home", "/sb/work/ws", "/sb/work/home"},
		{"apart", "/tmp/a/proj", "/root", "/sb/work/tmp/a/proj", "/sb/work/root"},
		{"HOME in the workspace", "/a", "/a/b", "/sb/work/a", "/sb/home"},
		{"the workspace is HOME", "/home/me", "/home/me", "/sb/work/me", "/sb/home"},
		{"no HOME", "/home/me/proj", "", "/sb/work/proj", "/sb/home"},
		{"a relative workspace", "proj", "/home/me", "/sb/work/proj", "/sb/home"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			work, home := sandboxLayout("/sb", filepath.Base(tc.work), tc.work, tc.home)
			if work != tc.wantWork || home != tc.wantHome {
				t.Errorf("sandboxLayout(%q, %q) = %q, %q; want %q, %q", tc.work, tc.home, work, home, tc.wantWork, tc.wantHome)
			}
			if tc.wantHome != "/sb/home" {
				rw, _ := filepath.Rel(tc.work, tc.home)
				rs, _ := filepath.Rel(work, home)
				if rw != rs {
					t.Errorf("HOME from the workspace: recorded %q, sandbox %q", rw, rs)
				}
			}
		})
	}
}
