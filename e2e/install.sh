#!/usr/bin/env bash
# Installs the real agent the end-to-end tests drive, codex-acp, outside the
# repository, and prints the path of its binary on stdout:
#
#	export ACPTAP_CODEX_ACP="$(e2e/install.sh)"
#	go test ./e2e/
#
# Idempotent: the npm packages are cached in $ACPTAP_E2E_CACHE (default
# $HOME/.cache/acptap-e2e) and not fetched again when the pinned version is
# there. Progress and errors go to stderr.
set -euo pipefail

version="${CODEX_ACP_VERSION:-0.16.0}"
cache="${ACPTAP_E2E_CACHE:-$HOME/.cache/acptap-e2e}"

case "$(uname -s)-$(uname -m)" in
Linux-x86_64) platform=linux-x64 ;;
Linux-aarch64 | Linux-arm64) platform=linux-arm64 ;;
Darwin-arm64) platform=darwin-arm64 ;;
Darwin-x86_64) platform=darwin-x64 ;;
*)
	echo "e2e/install.sh: no codex-acp build for $(uname -s)-$(uname -m)" >&2
	exit 1
	;;
esac

pkg="$cache/node_modules/@zed-industries/codex-acp-$platform"
bin="$pkg/bin/codex-acp"

installed_version() {
	# The version field of the platform package's package.json, without node.
	sed -n 's/^[[:space:]]*"version":[[:space:]]*"\([^"]*\)".*/\1/p' "$pkg/package.json" 2>/dev/null | head -n 1
}

if [ -x "$bin" ] && [ "$(installed_version)" = "$version" ]; then
	echo "e2e/install.sh: codex-acp $version already in $cache" >&2
else
	if ! command -v npm >/dev/null 2>&1; then
		echo "e2e/install.sh: npm not found; install Node.js (npm) to fetch @zed-industries/codex-acp" >&2
		exit 1
	fi
	echo "e2e/install.sh: installing @zed-industries/codex-acp@$version into $cache" >&2
	mkdir -p "$cache"
	npm install --prefix "$cache" --no-audit --no-fund --loglevel=error \
		"@zed-industries/codex-acp@$version" >&2
	if [ ! -x "$bin" ]; then
		echo "e2e/install.sh: $bin is missing after npm install (optional dependency @zed-industries/codex-acp-$platform not installed?)" >&2
		exit 1
	fi
	if [ "$(installed_version)" != "$version" ]; then
		echo "e2e/install.sh: $pkg is version $(installed_version), want $version" >&2
		exit 1
	fi
fi

# A binary that cannot start is an installation error, not a test failure.
if ! "$bin" --help >/dev/null 2>&1; then
	echo "e2e/install.sh: $bin --help failed; the installation is broken (delete $cache and run again)" >&2
	exit 1
fi
echo "$bin"
