#!/usr/bin/env bash
# Installs the real agents the end-to-end tests drive outside the repository,
# and prints, on stdout, one shell assignment per agent naming its binary:
#
#	eval "$(e2e/install.sh)"
#	go test ./e2e/
#
# prints
#
#	export ACPTAP_CODEX_ACP='.../codex-acp'          @zed-industries/codex-acp
#	export ACPTAP_CLAUDE_ACP='.../claude-agent-acp'  @agentclientprotocol/claude-agent-acp
#	export ACPTAP_GEMINI_CLI='.../gemini'            @google/gemini-cli
#	export ACPTAP_OPENCODE='.../opencode'            opencode-ai
#	export ACPTAP_QWEN_CODE='.../qwen'               @qwen-code/qwen-code
#	export ACPTAP_MCP_FILESYSTEM='.../mcp-server-filesystem'  @modelcontextprotocol/server-filesystem
#
# (the last an MCP server the agents are given, not an agent).
#
# An agent whose variable is already set is left alone and its value printed
# as it is, so that a hand-set (or deliberately broken) path reaches the
# tests. Idempotent: the npm packages are cached in $ACPTAP_E2E_CACHE (default
# $HOME/.cache/acptap-e2e) and not fetched again when the pinned versions are
# there. Progress and errors go to stderr; on an error nothing is printed on
# stdout and the exit status is 1.
set -euo pipefail

codex_version="${CODEX_ACP_VERSION:-0.16.0}"
claude_version="${CLAUDE_AGENT_ACP_VERSION:-0.101.0}"
gemini_version="${GEMINI_CLI_VERSION:-0.61.0}"
opencode_version="${OPENCODE_VERSION:-1.18.33}"
qwen_version="${QWEN_CODE_VERSION:-0.24.4}"
mcp_filesystem_version="${MCP_FILESYSTEM_VERSION:-2026.8.31}"
cache="${ACPTAP_E2E_CACHE:-$HOME/.cache/acptap-e2e}"
modules="$cache/node_modules"

say() { echo "e2e/install.sh: $*" >&2; }
die() {
	say "$@"
	exit 1
}

case "$(uname -s)-$(uname -m)" in
Linux-x86_64) platform=linux-x64 ;;
Linux-aarch64 | Linux-arm64) platform=linux-arm64 ;;
Darwin-arm64) platform=darwin-arm64 ;;
Darwin-x86_64) platform=darwin-x64 ;;
*) die "no codex-acp build for $(uname -s)-$(uname -m)" ;;
esac

# version_of prints the version field of a package.json, without node.
version_of() {
	sed -n 's/^[[:space:]]*"version":[[:space:]]*"\([^"]*\)".*/\1/p' "$1/package.json" 2>/dev/null | head -n 1
}

# Each agent: its variable, npm package, pinned version, the directory whose
# package.json carries the version, and its binary.
agents=(
	"ACPTAP_CODEX_ACP|@zed-industries/codex-acp|$codex_version|$modules/@zed-industries/codex-acp-$platform|$modules/@zed-industries/codex-acp-$platform/bin/codex-acp"
	"ACPTAP_CLAUDE_ACP|@agentclientprotocol/claude-agent-acp|$claude_version|$modules/@agentclientprotocol/claude-agent-acp|$modules/.bin/claude-agent-acp"
	"ACPTAP_GEMINI_CLI|@google/gemini-cli|$gemini_version|$modules/@google/gemini-cli|$modules/.bin/gemini"
	"ACPTAP_OPENCODE|opencode-ai|$opencode_version|$modules/opencode-ai|$modules/.bin/opencode"
	"ACPTAP_QWEN_CODE|@qwen-code/qwen-code|$qwen_version|$modules/@qwen-code/qwen-code|$modules/.bin/qwen"
	"ACPTAP_MCP_FILESYSTEM|@modelcontextprotocol/server-filesystem|$mcp_filesystem_version|$modules/@modelcontextprotocol/server-filesystem|$modules/.bin/mcp-server-filesystem"
)

# Which pinned packages are missing or at another version.
missing=()
for a in "${agents[@]}"; do
	IFS='|' read -r var pkg version dir bin <<<"$a"
	if [ -n "${!var:-}" ]; then
		continue
	fi
	if [ -x "$bin" ] && [ "$(version_of "$dir")" = "$version" ]; then
		say "$pkg $version already in $cache"
	else
		missing+=("$pkg@$version")
	fi
done

if [ "${#missing[@]}" -gt 0 ]; then
	command -v npm >/dev/null 2>&1 || die "npm not found; install Node.js (npm) to fetch ${missing[*]}"
	say "installing ${missing[*]} into $cache"
	mkdir -p "$cache"
	# Every pinned package in one install, so that npm keeps them all (an
	# install of one prunes what package.json does not list).
	all=()
	for a in "${agents[@]}"; do
		IFS='|' read -r var pkg version dir bin <<<"$a"
		[ -n "${!var:-}" ] || all+=("$pkg@$version")
	done
	npm install --prefix "$cache" --no-audit --no-fund --loglevel=error "${all[@]}" >&2
fi

out=""
for a in "${agents[@]}"; do
	IFS='|' read -r var pkg version dir bin <<<"$a"
	if [ -n "${!var:-}" ]; then
		out+="export $var='${!var}'"$'\n'
		continue
	fi
	[ -x "$bin" ] || die "$bin is missing after npm install of $pkg@$version (delete $cache and run again)"
	[ "$(version_of "$dir")" = "$version" ] || die "$dir is version $(version_of "$dir"), want $version (delete $cache and run again)"
	# A binary that cannot start is an installation error, not a test
	# failure. codex-acp has no --version; the node agents print theirs.
	if [ "$var" = ACPTAP_CODEX_ACP ]; then
		"$bin" --help >/dev/null 2>&1 </dev/null ||
			die "$bin --help failed; the installation is broken (delete $cache and run again)"
	elif [ "$var" = ACPTAP_MCP_FILESYSTEM ]; then
		# An MCP server has no --version; it answers on stdio.
		echo '{"jsonrpc":"2.0","id":1,"method":"tools/list"}' | "$bin" "$cache" 2>/dev/null | grep -q '"list_allowed_directories"' ||
			die "$bin does not answer tools/list; the installation is broken (delete $cache and run again)"
	else
		got=$("$bin" --version 2>&1 </dev/null) ||
			die "$bin --version failed (Node.js too old?): $(echo "$got" | head -n 3)"
		[ "$got" = "$version" ] || die "$bin --version printed $(echo "$got" | head -n 1), want $version"
	fi
	out+="export $var='$bin'"$'\n'
done
printf '%s' "$out"
