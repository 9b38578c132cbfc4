// Package e2e holds acptap's end-to-end tests against a real agent,
// codex-acp (npm @zed-industries/codex-acp), talking to the scripted
// Responses API of internal/fakeresponses.
//
// The tests run only when ACPTAP_CODEX_ACP names the codex-acp binary:
//
//	eval "$(e2e/install.sh)"
//	go test ./e2e/
//
// Without it they skip; with it set to something that does not run, they
// fail. Everything runs as real processes: acptap and the scripted editor
// (internal/testeditor/cmd/testeditor) are built by TestMain, the editor drives `acptap
// record -- codex-acp ...`, and `acptap replay` then re-runs codex-acp
// with no LLM upstream at all.
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
package e2e
