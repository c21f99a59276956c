#!/usr/bin/env bash
# schema_dump.sh [--check] [--from-release REV] [OUT] — the ledger schema as
# one readable file.
#
# Applies every migration compiled into runledger (`runledger migrate`) to a
# fresh, private schema, dumps it with pg_dump (schema only, no owners, no
# privileges) and normalises the dump so the same migrations always give the
# same bytes. Writes OUT (default schema/current.sql).
#
#   --check   compare with OUT instead of writing it: exit 0 when equal, 1
#             with a unified diff when OUT is stale
#   --from-release REV
#             first migrate the schema as the release at git revision REV
#             did (each of its schema/NNN_*.sql files in its own
#             transaction, recorded in schema_migrations with the SHA-256
#             of its text), then as this build does: the upgrade a
#             deployed ledger goes through. The revision is read from the
#             repository's history with git.
#
# PostgreSQL: DATABASE_URL when set (the harness's build/services.env, or any
# database the role may create a schema in); otherwise a throwaway cluster
# from tests/harness/pg.sh under the build folder, stopped and removed again
# on every way out.
#
# Environment: RUNLEDGER_BIN (default $BUILD_DIR/consumer/runledger, i.e.
# build/consumer/runledger), PG_BINDIR (pg_dump's folder; default the
# PostgreSQL 15 of Debian 12, so the dump's format matches the server).
#
# Exit: 0 written or current, 1 stale (--check), 2 usage, 3 a tool or the
# database failed.
set -euo pipefail

prog=schema_dump.sh
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
die() {
    echo "$prog: $*" >&2
    exit 3
}

check=0
release=
out=
while [ $# -gt 0 ]; do
    case $1 in
    --check) check=1 ;;
    --from-release)
        [ $# -ge 2 ] || {
            echo "usage: $prog [--check] [--from-release REV] [OUT]" >&2
            exit 2
        }
        release=$2
        shift
        ;;
    -h | --help)
        sed -n '2,/^set -euo/{/^#/s/^# \{0,1\}//p}' "${BASH_SOURCE[0]}"
        exit 0
        ;;
    -*)
        echo "usage: $prog [--check] [--from-release REV] [OUT]" >&2
        exit 2
        ;;
    *) out=$1 ;;
    esac
    shift
done
out=${out:-$root/schema/current.sql}

bin=${RUNLEDGER_BIN:-$root/${BUILD_DIR:-build}/consumer/runledger}
[ -x "$bin" ] || die "no runledger binary at $bin (run \`make build\`)"

if [ -n "${PG_BINDIR:-}" ]; then
    pg_dump=$PG_BINDIR/pg_dump
elif [ -x /usr/lib/postgresql/15/bin/pg_dump ]; then
    pg_dump=/usr/lib/postgresql/15/bin/pg_dump
else
    pg_dump=$(command -v pg_dump) || die "pg_dump not found (run tests/harness/deps.sh)"
fi
command -v psql >/dev/null || die "psql not found (run tests/harness/deps.sh)"

work=$(mktemp -d)
own_pg=
# The schema name is unique per call so that concurrent runs (and the pg
# tests sharing the database) never meet, and long enough that stripping it
# from the dump cannot touch anything else.
schema=rl_schema_dump_$$_$(date +%s)
url=${DATABASE_URL:-}

cleanup() {
    if [ -n "$url" ]; then
        psql -X -q -v ON_ERROR_STOP=0 "$url" \
            -c "DROP SCHEMA IF EXISTS \"$schema\" CASCADE" >/dev/null 2>&1 || true
    fi
    if [ -n "$own_pg" ]; then
        "$root/tests/harness/pg.sh" stop "$own_pg" >/dev/null 2>&1 || true
        rm -rf "$own_pg"
    fi
    rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

if [ -z "$url" ]; then
    # Under the build folder, like the harness's services: as root pg.sh runs
    # PostgreSQL as the postgres user, who cannot enter mktemp's 0700 folder.
    own_pg=$root/${BUILD_DIR:-build}/schema-pg-$$
    "$root/tests/harness/pg.sh" start "$own_pg" >/dev/null ||
        die "could not start a throwaway PostgreSQL"
    url=$(sed -n 's/^DATABASE_URL=//p' "$own_pg/env")
    [ -n "$url" ] || die "pg.sh wrote no DATABASE_URL"
fi

# The migrations run exactly as an operator runs them: through the binary
# that compiled them in, so the dump shows what `runledger migrate` builds.
# The release's own migrate: its bookkeeping table, then each file in name
# order in a transaction of its own with its row.
if [ -n "$release" ]; then
    git -C "$root" rev-parse --verify --quiet "$release^{commit}" >/dev/null ||
        die "revision $release is not in this repository's history"
    psql -X -q -v ON_ERROR_STOP=1 "$url" \
        -c "CREATE SCHEMA \"$schema\"" \
        -c "CREATE TABLE \"$schema\".schema_migrations (name text PRIMARY KEY, checksum text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())" \
        >/dev/null || die "could not create the release's schema"
    for name in $(git -C "$root" ls-tree --name-only "$release" schema/ |
        sed -n 's:^schema/\([0-9][0-9][0-9]_.*\.sql\)$:\1:p' | sort); do
        git -C "$root" show "$release:schema/$name" >"$work/$name"
        sum=$(sha256sum <"$work/$name" | cut -c1-64)
        psql -X -q -v ON_ERROR_STOP=1 --single-transaction "$url" \
            -c "SET search_path TO \"$schema\"" -f "$work/$name" \
            -c "INSERT INTO schema_migrations (name, checksum) VALUES ('$name', '$sum')" \
            >"$work/release.log" 2>&1 || {
            cat "$work/release.log" >&2
            die "could not apply $name of $release"
        }
    done
fi

"$bin" migrate --database-url "$url" --schema "$schema" >"$work/migrate.log" 2>&1 || {
    cat "$work/migrate.log" >&2
    die "runledger migrate failed"
}

"$pg_dump" --schema-only --no-owner --no-privileges \
    --schema="$schema" --file="$work/raw.sql" "$url" ||
    die "pg_dump failed"

# Normalising: the version banner, pg_dump's '--' comments (they name the
# private schema), the session SET lines, pg_dump's per-run \restrict key
# (15.14 and later) and the schema's own CREATE SCHEMA vary between runs or
# say nothing about the ledger; every qualified name loses the private
# schema's prefix, and the search_path a SECURITY DEFINER function pins
# names it as '<ledger schema>'.
# Blank-line runs collapse to one, none at either end, so the file reads
# as a list of objects.
{
    echo "-- The ledger schema after every migration in schema/NNN_*.sql."
    echo "-- Generated by tests/harness/schema_dump.sh (\`make schema\`); do not edit."
    echo "-- tests/schema checks that it is current."
    echo
    sed -E -e '/^--$/d' -e '/^-- (Name|Dumped from|Dumped by|PostgreSQL database dump)/d' \
        -e '/^SET /d' \
        -e "/^SELECT pg_catalog.set_config\\('search_path'/d" \
        -e '/^\\(un)?restrict /d' \
        -e "/^CREATE SCHEMA $schema;\$/d" \
        -e "s/\\b$schema\\.//g" \
        -e "s/'$schema'/'<ledger schema>'/g" \
        "$work/raw.sql" |
        awk 'NF { if (seen && gap) print ""; print; seen = 1; gap = 0; next } { gap = 1 }'
} >"$work/current.sql"

if grep -q "$schema" "$work/current.sql"; then
    grep -n "$schema" "$work/current.sql" >&2
    die "the private schema's name is still in the dump: normalising missed it"
fi

if [ "$check" = 1 ]; then
    [ -f "$out" ] || die "no $out to check (run \`make schema\`)"
    if diff -u --label "$out (committed)" --label "$out (from the migrations)" \
        "$out" "$work/current.sql"; then
        echo "$prog: $out is current"
        exit 0
    fi
    echo "$prog: $out is stale: run \`make schema\` and commit the result" >&2
    exit 1
fi

mkdir -p "$(dirname "$out")"
cp "$work/current.sql" "$out"
echo "$prog: wrote $out ($(wc -l <"$out") lines)"
