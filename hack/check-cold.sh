#!/usr/bin/env bash
# `make check-cold`: `make test` as a new user's fresh machine runs it. A clean clone of HEAD, with the
# project's cache, Go's build and module caches, pip's and every XDG cache pointed at empty directories under
# COLD_ROOT (default: a new directory in /tmp; an existing one must be empty), so that every binary, image and
# package is built or fetched again. Debian's packages are the machine's: remove them first to time their
# installation too. Prints each step's time and the total, and leaves the log in COLD_ROOT/test.log.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
root=${COLD_ROOT:-$(mktemp -d /tmp/appschedule-cold.XXXXXX)}
mkdir -p "$root"
if [ -n "$(ls -A "$root")" ]; then
	echo "check-cold: $root is not empty; give an empty COLD_ROOT" >&2
	exit 2
fi
git clone --quiet --no-local "$repo" "$root/src"
export APPSCHEDULE_CACHE="$root/cache" GOCACHE="$root/go-build" GOPATH="$root/go" GOMODCACHE="$root/go/pkg/mod" \
	XDG_CACHE_HOME="$root/xdg" PIP_CACHE_DIR="$root/pip" STEP_LOG="$root/steps"
unset GOFLAGS KUBECONFIG APPSCHEDULE_TEST_KUBECONFIG
echo "check-cold: $(git -C "$root/src" log -1 --format='%h %s') in $root"
start=$(date +%s)
set +e
(cd "$root/src" && make test) 2>&1 | tee "$root/test.log"
code=${PIPESTATUS[0]}
set -e
total=$(($(date +%s) - start))
echo
echo "check-cold: steps of a cold \`make test\` (seconds):"
awk '{ printf "  %-12s %6d%s\n", $1, $2, ($3 == 0 ? "" : "  FAILED") }' "$root/steps" 2>/dev/null || true
echo "  total        $(printf '%6d' "$total")  ($((total / 60)) min $((total % 60)) s)$([ "$code" -eq 0 ] || echo "  FAILED")"
exit "$code"
