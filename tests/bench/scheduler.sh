#!/usr/bin/env bash
# scheduler.sh — 10,000 schedules firing every minute through one
# `runledger scheduler`: prints, per window, the publish lag (the broker's
# timestamp of each window's event minus the window start) p50/p99/max and
# the scheduler's VmRSS/VmHWM. Printed figures, not a timed test.
#
# usage: tests/bench/scheduler.sh [SCHEDULES] [MINUTES]   (10000, 3)
# Uses the services of build/services.env (make services-up) and the
# bench_scheduler program of the plain build (make build).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build=${BUILD_DIR:-$root/build}
[ -f "$build/services.env" ] || { echo "scheduler.sh: run make services-up first" >&2; exit 2; }
# shellcheck disable=SC1091
. "$build/services.env"
cd "$build/tests/scheduler"
RUNLEDGER_BIN=${RUNLEDGER_BIN:-$build/consumer/runledger} RL_SOURCE_DIR=$root \
    ./bench_scheduler "${1:-10000}" "${2:-3}" 2>/dev/null
