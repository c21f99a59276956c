#!/usr/bin/env bash
# demo.sh — the body of `make demo` once $BUILD_DIR is built: starts the
# throwaway services, shows what Runledger does on them, and stops the
# services on every way out (the exit code stays the demo's).
#
# For now: the identity of one logical run, the ledger migrated twice (the
# second run applies nothing), and the columns of the runs table.
#
# Environment: BUILD_DIR (build), RL_SERVICES_DIR, RL_SERVICES_ENV.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$root"
build_dir=$(realpath -m -- "${BUILD_DIR:-build}")
export RL_SERVICES_DIR=${RL_SERVICES_DIR:-$build_dir/services}
export RL_SERVICES_ENV=${RL_SERVICES_ENV:-$build_dir/services.env}
bin=$build_dir/consumer/runledger

[ -x "$bin" ] || {
    echo "demo.sh: $bin not found: run make build first" >&2
    exit 1
}

down() {
    local rc=$? log
    trap - EXIT
    # The services must stop even when stdout is gone (`| head`): no failed
    # write may end this handler early.
    trap '' PIPE
    set +e
    echo
    echo "== stopping the services"
    log=$(mktemp)
    "$root/tests/harness/services.sh" down >"$log" 2>&1 || rc=1
    cat "$log"
    rm -f "$log"
    if [ "$rc" -eq 0 ]; then
        echo "demo: done"
    else
        echo "demo: FAILED (exit $rc)" >&2
    fi
    exit "$rc"
}
trap down EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

step() {
    echo
    echo "== $*"
}

step "starting throwaway PostgreSQL, Kafka and the stub model"
"$root/tests/harness/services.sh" up
# shellcheck disable=SC1090 # written by services.sh
. "$RL_SERVICES_ENV"

step "one logical run has one identity, whoever computes it"
echo "\$ runledger id --job competitor-summary --tenant workspace-acme" \
    "--at 2026-08-07T09:00:00+00:00 --version v1"
"$bin" id --job competitor-summary --tenant workspace-acme \
    --at 2026-08-07T09:00:00+00:00 --version v1

step "migrating the ledger (DATABASE_URL=$DATABASE_URL)"
echo "\$ runledger migrate"
"$bin" migrate
step "migrating again applies nothing"
echo "\$ runledger migrate"
"$bin" migrate

step "the columns of the runs table"
psql -X -v ON_ERROR_STOP=1 "$DATABASE_URL" -c "
    SELECT column_name, data_type, is_nullable, column_default
      FROM information_schema.columns
     WHERE table_schema = current_schema() AND table_name = 'runs'
     ORDER BY ordinal_position"
