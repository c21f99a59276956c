#!/usr/bin/env bash
# Fails when a ledger migrated by the last release and then by this build
# differs from schema/current.sql (the schema a fresh ledger gets), or when
# this build records for any released migration a checksum other than the
# release's own: the released binary must still accept every file it knows
# during a rolling upgrade and after a rollback.
#
# RL_RELEASE_REV names the release (default the last release's commit,
# tests/harness/last_release). It needs the
# repository's history (git), and the harness's PostgreSQL (DATABASE_URL):
# without it the test skips (77) on a partial local run and fails when
# RL_REQUIRE_SERVICES is set.
set -euo pipefail

root=${RL_SOURCE_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
rev=${RL_RELEASE_REV:-$(grep -v '^#' "$root/tests/harness/last_release" | cut -d' ' -f2)}
bin=${RUNLEDGER_BIN:?RUNLEDGER_BIN is not set}

# shellcheck source=require_db.sh
. "$(dirname "${BASH_SOURCE[0]}")/require_db.sh"

rc=0
"$root/tests/harness/schema_dump.sh" --check --from-release "$rev" \
    "$root/schema/current.sql" || rc=$?
[ "$rc" -eq 0 ] || exit 1

schema=rl_release_sums_$$
trap 'psql -X -q "$DATABASE_URL" -c "DROP SCHEMA IF EXISTS $schema CASCADE" >/dev/null 2>&1 || true' EXIT
"$bin" migrate --database-url "$DATABASE_URL" --schema "$schema" >/dev/null 2>&1
bad=0
for name in $(git -C "$root" ls-tree --name-only "$rev" schema/ |
    sed -n 's:^schema/\([0-9][0-9][0-9]_.*\.sql\)$:\1:p'); do
    want=$(git -C "$root" show "$rev:schema/$name" | sha256sum | cut -c1-64)
    got=$(psql -X -At "$DATABASE_URL" \
        -c "SELECT checksum FROM $schema.schema_migrations WHERE name = '$name'")
    if [ "$got" != "$want" ]; then
        echo "$name: this build records ${got:-nothing}, the release recorded $want" >&2
        bad=1
    fi
done
[ "$bad" -eq 0 ] && echo "check_upgrade_from_release.sh: release $rev upgrades to schema/current.sql and keeps its checksums"
exit "$bad"
