// Package e2e holds acptap's end-to-end tests against five real agents:
// codex-acp (npm @zed-industries/codex-acp) talking to the scripted
// Responses API of internal/testing/fakeresponses, claude-agent-acp talking to the
// scripted Messages API of internal/testing/fakeanthropic, gemini-cli talking
// to the scripted Gemini API of internal/testing/fakegemini, and opencode
// (npm opencode-ai) and qwen-code (npm @qwen-code/qwen-code) talking to
// fakeanthropic too.
//
// Each agent's tests run only when its variable (ACPTAP_CODEX_ACP,
// ACPTAP_CLAUDE_ACP, ACPTAP_GEMINI_CLI, ACPTAP_OPENCODE, ACPTAP_QWEN_CODE)
// names its binary, as
// e2e/install.sh prints them:
//
//	eval "$(e2e/install.sh)"
//	go test ./e2e/
//
// Without it they skip; with it set to something that does not run, they
// fail. Everything runs as real processes: acptap and the scripted editor
// (internal/testing/testeditor/cmd/testeditor) are built by TestMain, the editor drives `acptap
// record -- codex-acp ...`, and `acptap replay` then re-runs codex-acp
// with no LLM upstream at all.
//
// An agent's LLM traffic reaches the tap by two routes, the forward
// proxy and a base URL (below). In the normal run each test of an agent
// takes one of them, the agent's tests split between the two (codex-acp's
// WebSocket test takes both); ACPTAP_E2E_ALL_ROUTES=1
// (scripts/test-full) runs every test by both.
//
// # How codex-acp reaches the tap
//
// Codex takes its LLM base URL from its configuration
// (-c 'model_providers.fake={base_url="...",...}'), never from an
// environment variable: OPENAI_BASE_URL is ignored by codex 0.137 (the
// version codex-acp 0.16 embeds). The tests record both ways:
//
//   - proxy: base_url names an HTTPS fake upstream; codex goes through
//     acptap's HTTPS_PROXY and trusts the interception CA from
//     CODEX_CA_CERTIFICATE / SSL_CERT_FILE; acptap trusts the fake's
//     certificate with --upstream-ca.
//   - base URL: `acptap record --no-proxy-env --base-url
//     FAKE_BASE_URL=<plain HTTP fake>` and the agent command is a shell
//     wrapper that puts $FAKE_BASE_URL into the -c option, since Codex
//     does not expand variables in its configuration. Replay sets
//     FAKE_BASE_URL to its own route and runs the same wrapper.
//
// # Codex settings the scenarios need
//
//   - model=gpt-5.2-codex: a model Codex knows, so that it does not
//     prepend a "Model metadata not found" warning to the first answer.
//   - features.unified_exec=false for the shell scenario: with the
//     default PTY-based exec_command tool, whether the completed
//     tool_call_update carries the command's output (and sometimes whether
//     it is sent at all) depends on a race inside codex-acp; the classic
//     shell_command tool reports it every time.
//   - request_max_retries=1 for the fault scenarios: Codex retries a 5xx
//     once, and the replay's recorded response answers the retry. Codex
//     never retries a 429, whatever request_max_retries and
//     stream_max_retries say: a 429 fault ends the turn with an error.
//   - codex-acp does not exit when its stdin closes: record and replay run
//     with a short --grace, after which acptap terminates it.
//
// # How claude-agent-acp reaches the tap
//
// claude-agent-acp (npm @agentclientprotocol/claude-agent-acp) runs the
// native Claude Code binary, which reads ANTHROPIC_BASE_URL. The base-URL
// route is `acptap record --no-proxy-env --base-url
// ANTHROPIC_BASE_URL=<plain fake>`; the proxy route names the HTTPS fake
// in ANTHROPIC_BASE_URL and goes through acptap's HTTPS_PROXY, trusting
// the interception CA from NODE_EXTRA_CA_CERTS. The agent command is
// `env VARS... claude-agent-acp`, so that a replay, which runs the
// recorded command in an environment of its own, sets them too:
// CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC, DISABLE_TELEMETRY and
// DISABLE_AUTOUPDATER (no calls to api.anthropic.com), IS_SANDBOX (root),
// ANTHROPIC_MODEL and ANTHROPIC_SMALL_FAST_MODEL of one model (the session
// title is asked for with either, by a race). The permission mode is in
// the workspace's .claude/settings.json, carried into the replays by
// `record --snapshot`; the bypassPermissions change is a user's
// CLAUDE_CONFIG_DIR settings in a workspace that sets no mode. Claude
// Code's session-title request, made next to the first turn, asks for
// structured output and has a replay queue of its own; it races the first
// turn, so the fake starts turns after claudeTurnDelay and only once it has
// answered the title, and the replays keep the recorded timing (--speed 1),
// for the title to land first; it pauses before a tool call's input, for
// claude-agent-acp announces the call as it starts.
//
// # How gemini-cli reaches the tap
//
// gemini-cli (npm @google/gemini-cli, run as `gemini --acp`) reads its
// base URL from GOOGLE_GEMINI_BASE_URL and its key from GEMINI_API_KEY,
// which it sends in the x-goog-api-key header. The base-URL route is
// `acptap record --no-proxy-env --base-url GOOGLE_GEMINI_BASE_URL=<plain
// fake>`; the proxy route names the HTTPS fake in GOOGLE_GEMINI_BASE_URL
// and goes through acptap's HTTPS_PROXY, trusting the interception CA
// from NODE_EXTRA_CA_CERTS. The agent command is `env
// GEMINI_CLI_NO_RELAUNCH=true GEMINI_CLI_TRUST_WORKSPACE=true
// [GOOGLE_GEMINI_BASE_URL=...] gemini --acp -m gemini-2.5-flash`, so that
// a replay, which runs the recorded command in an environment of its own,
// sets them too: one node process instead of two (the first of which
// ignores SIGTERM), and a trusted workspace, whose .gemini/settings.json
// (carried into the replays by `record --snapshot`, since the replay's
// HOME is empty) picks the gemini-api-key auth, turns off the usage
// statistics gemini-cli would post to play.googleapis.com, and turns off
// skills, which its system instruction lists in an order that varies. A
// pinned model spares the per-turn routing call of the "auto" model. The
// fault scenario records a 429 of a server out of capacity for the model,
// which gemini-cli retries after its RetryInfo delay (any other 429 or 5xx
// after 5s or more); the PGID in the shell tool's output ("Process Group
// PGID: 6726") is a process id the default normalization covers.
//
// # How opencode and qwen-code reach the tap
//
// Both read ANTHROPIC_BASE_URL (opencode through {env:} in the
// workspace's opencode.json) and ANTHROPIC_API_KEY. The base-URL route is
// `acptap record --no-proxy-env --base-url ANTHROPIC_BASE_URL=<plain
// fake>`; on the proxy route the agent command names the HTTPS fake in
// ANTHROPIC_BASE_URL, and the fake listens on 127.0.0.2, which NO_PROXY
// does not exempt, so that no --proxy-loopback is needed: with it,
// opencode's calls to its own HTTP server on 127.0.0.1 would go through
// the tap. Both keep their settings in the workspace, recorded with
// --snapshot: opencode.json and a configuration directory in .config
// (XDG_CONFIG_HOME, set by a shell wrapper to the workspace's, whichever
// it is) holding what stops opencode's npm install of its plugin package
// at start-up; qwen-code's .qwen/settings.json turning off its usage
// statistics, memory subagents and follow-up suggestions, all of which
// call out or ask the model for more. docs/agents.md says why each
// setting is there. Their tests take a minute or more each, and run only
// with ACPTAP_E2E_EXTRA=1 (scripts/agent-matrix sets it); TestAgentMatrix
// (scripts/agent-matrix, ACPTAP_E2E_MATRIX=1) measures every agent of the
// suite.
package e2e
