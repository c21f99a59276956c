#!/usr/bin/env bash
# venv.sh — prints a python that can import croniter: the system's when it
# has one (Debian's python3-croniter), else a venv of
# tests/cron/requirements.txt under $RL_CACHE_DIR/croniter-venv-<hash>,
# made on first use (pip, pinned version). Exit 1 when neither can be had:
# the comparison then fails, never passes silently.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
if python3 -c 'import croniter' 2>/dev/null; then
    command -v python3
    exit 0
fi
cache=${RL_CACHE_DIR:-$root/.cache}
req="$here/requirements.txt"
venv="$cache/croniter-venv-$(sha256sum "$req" | cut -c1-12)"
if ! "$venv/bin/python" -c 'import croniter' 2>/dev/null; then
    rm -rf "$venv"
    mkdir -p "$cache"
    python3 -m venv "$venv" >&2
    "$venv/bin/pip" install -q --disable-pip-version-check -r "$req" >&2
fi
echo "$venv/bin/python"
