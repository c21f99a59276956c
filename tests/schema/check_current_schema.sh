#!/usr/bin/env bash
# Fails when schema/current.sql differs from what the migrations
# compiled into RUNLEDGER_BIN build, and prints the diff.
#
# It uses the harness's PostgreSQL (DATABASE_URL, from build/services.env)
# and never a private one, so it tests the server the other pg tests use.
# Without DATABASE_URL it skips (77) for a partial local run, and fails when
# RL_REQUIRE_SERVICES is set, as under `make test`: a missing service must
# not pass as a skipped check.
set -euo pipefail

root=${RL_SOURCE_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}

# shellcheck source=require_db.sh
. "$(dirname "${BASH_SOURCE[0]}")/require_db.sh"

# schema_dump.sh exits 1 for a stale file and 3 for a failure; both fail the
# test, and neither may read as the skip code.
rc=0
"$root/tests/harness/schema_dump.sh" --check "$root/schema/current.sql" || rc=$?
[ "$rc" -eq 77 ] && rc=1
exit "$rc"
