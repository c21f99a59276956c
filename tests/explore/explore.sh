#!/usr/bin/env bash
# explore.sh — the body of `make explore`: runs the seeded fault explorer
# (tests/explore/README.md) for seeds SEED, SEED+1, ... until MINUTES have
# passed, one figure line per seed, and stops at the first seed whose
# history breaks a rule, printing that seed and how to repeat it.
#
# Environment: BUILD_DIR (build), SEED (20261206), MINUTES (5), WINDOW
# (seconds of faults per seed, 40), RL_CACHE_DIR (the Kafka jars).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build_dir=$(realpath -m -- "${BUILD_DIR:-build}")
seed=${SEED:-20261206}
minutes=${MINUTES:-5}
window=${WINDOW:-40}
bin=$build_dir/tests/explore/runledger_explore
work=$build_dir/explore

[ -x "$bin" ] || { echo "explore: $bin not built (make build)" >&2; exit 2; }
export RUNLEDGER_BIN=$build_dir/consumer/runledger RL_SOURCE_DIR=$root
# Every seed starts a PostgreSQL, a broker and a stub of its own; the
# shared services' variables only have to be present.
export DATABASE_URL=${DATABASE_URL:-private} \
    KAFKA_BOOTSTRAP_SERVERS=${KAFKA_BOOTSTRAP_SERVERS:-private} \
    MODEL_BASE_URL=${MODEL_BASE_URL:-private} RL_REQUIRE_SERVICES=1
mkdir -p "$work"
end=$((SECONDS + minutes * 60))
seeds=0
while :; do
    dir=$work/seed-$seed
    rm -rf "$dir"
    mkdir -p "$dir"
    if (cd "$dir" && "$bin" --seed "$seed" --window "$window" \
        >stdout.log 2>stderr.log); then
        tail -n 1 "$dir/stdout.log"
        rm -rf "$dir"
    else
        rc=$?
        tail -n 1 "$dir/stdout.log" || true
        grep -E 'VIOLATION|requirement failed|FAILED' "$dir/stderr.log" || true
        echo "explore: seed $seed FAILED (exit $rc) after $seeds passing seeds;" \
            "repeat: make explore SEED=$seed MINUTES=0, or $bin --seed $seed" \
            "--window $window; logs in $dir"
        exit 1
    fi
    seeds=$((seeds + 1))
    seed=$((seed + 1))
    [ "$SECONDS" -lt "$end" ] || break
done
echo "explore: $seeds seeds passed in $((SECONDS / 60)) min $((SECONDS % 60)) s"
