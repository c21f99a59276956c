#!/usr/bin/env bash
# venv.sh — prints the python of a venv holding tests/otlp/requirements.txt,
# creating it under $RL_CACHE_DIR/otlp-venv-<hash of the requirements>
# (pip from PyPI, pinned versions) when it is missing. Exit 1 when it
# cannot be made: the tests that need it then fail, never pass silently.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
cache=${RL_CACHE_DIR:-$root/.cache}
req="$here/requirements.txt"
venv="$cache/otlp-venv-$(sha256sum "$req" | cut -c1-12)"
if ! "$venv/bin/python" -c 'import opentelemetry.proto, google.protobuf' \
    2>/dev/null; then
    rm -rf "$venv"
    mkdir -p "$cache"
    python3 -m venv "$venv" >&2
    "$venv/bin/pip" install -q --disable-pip-version-check -r "$req" >&2
fi
echo "$venv/bin/python"
