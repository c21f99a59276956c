#!/usr/bin/env bash
# run_tests.sh — the body of `make test` once both builds exist:
#
#   1. start PostgreSQL, Kafka and the stub model (services.sh up)
#   2. ctest over $BUILD_DIR, then over $ASAN_BUILD_DIR (ASan + UBSan), with
#      RL_REQUIRE_SERVICES=1 so a missing service fails instead of skipping;
#      the $BUILD_DIR pass with RL_TEST_DB_ROLES=1, so every component the
#      tests start connects with a login of its own role (docs/deploying.md,
#      Database roles), the others with the migrating user's, the
#      single-role setup
#   3. valgrind --leak-check=full over the unit test executables of
#      $BUILD_DIR
#   4. ctest-tsan: two e2e tests of $TSAN_BUILD_DIR (ThreadSanitizer), with
#      tests/tsan's shim preloaded into the test and every consumer it
#      starts; any TSan report from any of those processes fails the test
#   5. the tests of $BUILD_DIR whose subject is the broker (label kafka)
#      once more against the older broker line (KAFKA_COMPAT_VERSION, default
#      the pom's kafka.compat.version, 3.9.x): the broker is swapped for one
#      of that version, and the tests' private brokers run it too
#   6. services.sh down — always, also after a failure or Ctrl-C
#
# Every phase runs even when an earlier one failed, so one run shows every
# failure; the exit code is non-zero when any phase failed. The last line
# is the total: "tests: N passed, N failed, N skipped".
#
# Environment: BUILD_DIR (build), ASAN_BUILD_DIR (build-asan),
# TSAN_BUILD_DIR (build-tsan), JOBS (2),
# RL_SERVICES_DIR, RL_SERVICES_ENV (see services.sh), CTEST_ARGS (extra
# ctest arguments, e.g. "-L unit" or "-R kafka"; the second Kafka pass adds
# its labels to them), KAFKA_VERSION (the broker of phases 1-3, see
# kafka.sh), KAFKA_COMPAT_VERSION (phase 5's broker; "none" skips phase 5).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$root"
build_dir=$(realpath -m -- "${BUILD_DIR:-build}")
asan_dir=$(realpath -m -- "${ASAN_BUILD_DIR:-build-asan}")
tsan_dir=$(realpath -m -- "${TSAN_BUILD_DIR:-build-tsan}")
jobs=${JOBS:-2}
export RL_SERVICES_DIR=${RL_SERVICES_DIR:-$build_dir/services}
export RL_SERVICES_ENV=${RL_SERVICES_ENV:-$build_dir/services.env}
logs=$build_dir/test-logs
# shellcheck disable=SC2206 # word splitting is the point
ctest_args=(${CTEST_ARGS:-})

start=$SECONDS
passed=0
failed=0
skipped=0
phases=()
status=0

mkdir -p "$logs"

finish() {
    local rc=$? line
    trap - EXIT INT TERM
    # The services must stop even when stdout is gone (`| head`, a closed
    # terminal): no failed write may end this handler early.
    trap '' PIPE
    set +e
    echo
    echo "== services down"
    if ! "$root/tests/harness/services.sh" down >"$logs/services-down.log" 2>&1; then
        phases+=("services down: FAILED (log $logs/services-down.log)")
        status=1
    fi
    cat "$logs/services-down.log"
    # An interrupt or a harness error (set -e) is a failure too.
    if [ "$rc" -ne 0 ] && [ "$status" -eq 0 ]; then
        phases+=("harness: FAILED (exit $rc)")
        status=1
        failed=$((failed + 1))
    fi
    echo
    echo "== summary"
    for line in "${phases[@]}"; do
        echo "   $line"
    done
    echo "   total: $((SECONDS - start))s"
    echo "tests: $passed passed, $failed failed, $skipped skipped"
    exit "$status"
}
trap finish EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# Adds one ctest run's counts from its log. A run that printed no summary
# (no tests, a crash) counts as one failure.
count_ctest() {
    local log=$1 name=$2 rc=$3 total nfail nskip
    total=$(sed -n 's/.*tests passed, \([0-9]*\) tests\{0,1\} failed out of \([0-9]*\).*/\2/p' "$log" | tail -n 1)
    nfail=$(sed -n 's/.*tests passed, \([0-9]*\) tests\{0,1\} failed out of \([0-9]*\).*/\1/p' "$log" | tail -n 1)
    if [ -z "$total" ]; then
        # A run that ran nothing proves nothing: a failure too.
        failed=$((failed + 1))
        status=1
        phases+=("$name: FAILED (no ctest summary, exit $rc; log $log)")
        return
    fi
    # Skipped tests (exit 77 without RL_REQUIRE_SERVICES, or disabled) are
    # listed under "The following tests did not run:"; "Not Run" ones (no
    # executable) are counted among the failures by ctest itself.
    nskip=$(grep -cE '^[[:space:]]+[0-9]+ - .+ \((Skipped|Disabled)\)$' "$log" || true)
    passed=$((passed + total - nfail - nskip))
    failed=$((failed + nfail))
    skipped=$((skipped + nskip))
    if [ "$rc" -ne 0 ] || [ "$nfail" -ne 0 ]; then
        status=1
        phases+=("$name: FAILED ($nfail of $total failed; log $log)")
    else
        phases+=("$name: ok ($((total - nskip)) passed, $nskip skipped)")
    fi
}

run_ctest() {
    local dir=$1 name=$2 log rc=0
    shift 2
    log=$logs/$name.log
    echo
    echo "== $name: ctest --test-dir ${dir#"$root"/} -j$jobs ${ctest_args[*]} $*"
    if [ ! -f "$dir/CTestTestfile.cmake" ]; then
        echo "$dir is not a configured build: run make build build-asan" >&2
        phases+=("$name: FAILED (no build in $dir)")
        failed=$((failed + 1))
        status=1
        return
    fi
    ctest --test-dir "$dir" --output-on-failure -j"$jobs" "${ctest_args[@]}" \
        "$@" 2>&1 | tee "$log" || rc=$?
    count_ctest "$log" "$name" "$rc"
}

# Runs each unit test executable that the build made under valgrind, with
# the ENVIRONMENT and WORKING_DIRECTORY ctest would give it. Tests run by an
# interpreter (cmake -P, python3) are not ours to leak-check.
run_valgrind() {
    local log=$logs/valgrind.log rc=0 counts
    echo
    echo "== valgrind: unit test executables of ${build_dir#"$root"/}"
    command -v valgrind >/dev/null 2>&1 || {
        phases+=("valgrind: FAILED (valgrind not installed)")
        failed=$((failed + 1))
        status=1
        return
    }
    python3 - "$build_dir" "$jobs" "$logs/valgrind.counts" <<'EOF' 2>&1 | tee "$log" || rc=$?
import concurrent.futures, json, os, subprocess, sys

build_dir, jobs, counts_file = sys.argv[1], int(sys.argv[2]), sys.argv[3]
listing = subprocess.run(
    ["ctest", "--test-dir", build_dir, "-L", "unit", "--show-only=json-v1"],
    check=True, capture_output=True, text=True).stdout
tests = []
for t in json.loads(listing).get("tests", []):
    cmd = t.get("command") or []
    if not cmd or not os.path.realpath(cmd[0]).startswith(
            os.path.realpath(build_dir) + os.sep):
        continue
    props = {p["name"]: p["value"] for p in t.get("properties", [])}
    env = dict(os.environ)
    for kv in props.get("ENVIRONMENT", []):
        k, _, v = kv.partition("=")
        env[k] = v
    tests.append((t["name"], cmd, env, props.get("WORKING_DIRECTORY"),
                  int(props.get("SKIP_RETURN_CODE", -1)),
                  max(300, 10 * int(float(props.get("TIMEOUT", 60))))))

def run(test):
    name, cmd, env, cwd, skip_rc, timeout = test
    argv = ["valgrind", "--leak-check=full", "--error-exitcode=1",
            "--errors-for-leak-kinds=definite,indirect,possible",
            "--show-leak-kinds=definite,indirect,possible"]
    supp = os.path.join(env.get("RL_SOURCE_DIR", "."), "tests", "valgrind.supp")
    if os.path.exists(supp):
        argv.append("--suppressions=" + supp)
    try:
        p = subprocess.run(argv + cmd, env=env, cwd=cwd, timeout=timeout,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           text=True, errors="replace")
        return name, p.returncode, skip_rc, p.stdout
    except subprocess.TimeoutExpired as e:
        out = e.stdout if isinstance(e.stdout, str) else ""
        return name, -1, skip_rc, out + "\ntimed out after %ds\n" % timeout

ok = bad = skip = 0
with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, jobs)) as ex:
    for name, rc, skip_rc, out in ex.map(run, tests):
        if rc == 0:
            ok += 1
            print("valgrind: %-40s ok" % name)
        elif rc == skip_rc:
            skip += 1
            print("valgrind: %-40s skipped" % name)
        else:
            bad += 1
            print("valgrind: %-40s FAILED (exit %d)" % (name, rc))
            print(out)
with open(counts_file, "w") as f:
    f.write("%d %d %d\n" % (ok, bad, skip))
print("valgrind: %d passed, %d failed, %d skipped" % (ok, bad, skip))
sys.exit(1 if bad else 0)
EOF
    if ! counts=$(cat "$logs/valgrind.counts" 2>/dev/null); then
        phases+=("valgrind: FAILED (could not list or run the tests; log $log)")
        failed=$((failed + 1))
        status=1
        return
    fi
    read -r ok bad skip <<<"$counts"
    passed=$((passed + ok))
    failed=$((failed + bad))
    skipped=$((skipped + skip))
    if [ "$rc" -ne 0 ] || [ "$bad" -ne 0 ]; then
        status=1
        phases+=("valgrind: FAILED ($bad of $((ok + bad + skip)) failed; log $log)")
    else
        phases+=("valgrind: ok ($ok passed, $skip skipped)")
    fi
}

echo "== services up"
t0=$SECONDS
"$root/tests/harness/services.sh" up
phases+=("services up: ok ($((SECONDS - t0))s)")
# shellcheck disable=SC1090 # written by services.sh
. "$RL_SERVICES_ENV"
export RL_REQUIRE_SERVICES=1
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1

# The Kafka-facing tests against the older broker line, the last phase:
# the shared broker is replaced (same services folder, so `down` stops
# whichever runs) and KAFKA_VERSION is exported from here on for the brokers
# the fault and chaos tests start for themselves. KAFKA_LIBS_DIR names the
# main version's jars; the older version's have a cache folder of their own.
run_kafka_compat() {
    local version=$1 name="ctest-kafka-$1" up_log
    up_log=$logs/services-$name.log
    echo
    echo "== $name: the shared broker replaced by kafka $version"
    unset KAFKA_LIBS_DIR
    export KAFKA_VERSION=$version
    if ! { "$root/tests/harness/services.sh" down --only kafka &&
        "$root/tests/harness/services.sh" up --only kafka; } >"$up_log" 2>&1; then
        cat "$up_log"
        phases+=("$name: FAILED (no kafka $version broker; log $up_log)")
        failed=$((failed + 1))
        status=1
        return
    fi
    cat "$up_log"
    # shellcheck disable=SC1090 # written by services.sh
    . "$RL_SERVICES_ENV"
    # The tests labelled kafka: those whose subject is the broker (intake,
    # groups and rebalances, offsets, the relay's delivery and fencing,
    # dead letters, a broker killed or replaced, shutdown with it gone).
    # Not those whose subject is elsewhere (the ledger's failover, the
    # upgrade, rate limits, budgets, approvals, the console, provider
    # batches, the model's faults and crash points, operations' probes,
    # CLI and purge, the scheduler's windows): their Kafka traffic is the
    # intake and relay the others cover. Nor the chaos soak (4 minutes):
    # its subject is our processes killed at random, which the
    # rebalances, restarts and broker kills here cover against this broker
    # too.
    run_ctest "$build_dir" "$name" -L '^kafka$' \
        -LE '^(failover|upgrade|ratelimit|budget|approval|console|batch|chaos|ops|scheduler)$'
}

# ThreadSanitizer over the e2e tests that run the whole pipeline: the test
# and every runledger it spawns (RUNLEDGER_BIN, inheriting LD_PRELOAD and
# TSAN_OPTIONS) are TSan builds. tests/tsan/thrd_shim.c and
# suppressions.txt say why the shim is preloaded and what is suppressed.
# TSan writes each process's reports to <dir>/tsan.<pid>, since a
# consumer's stderr is a log file the test never reads; a test passes when
# it exits 0 and no such file exists (a TSan crash or CHECK failure in one
# consumer writes one too, and the others could still finish the test). A
# consumer that reports halts (halt_on_error), and the test would then wait
# minutes for work that never gets done, so the first report ends the test
# and the consumers it started (its own process group) two seconds later.
tsan_tests=(test_e2e_exactly_once:400 test_e2e_heartbeat_keeps_leases:120)

run_tsan() {
    local name=ctest-tsan entry test limit dir tdir pid rc t0 files reports
    local ok bad shim=$tsan_dir/tests/tsan/librl_tsan_thrd.so
    echo
    echo "== $name: ${tsan_tests[*]%%:*} from ${tsan_dir#"$root"/}"
    if [ ! -x "$tsan_dir/consumer/runledger" ] || [ ! -f "$shim" ]; then
        echo "$tsan_dir has no TSan build: run make build-tsan" >&2
        phases+=("$name: FAILED (no build in $tsan_dir)")
        failed=$((failed + 1))
        status=1
        return
    fi
    # LD_PRELOAD separates its paths by spaces and TSAN_OPTIONS its options:
    # neither can name a file in a clone whose path has a space. The shim,
    # the suppressions and the reports live in a folder of ours that has
    # none; the reports are copied beside the test's log.
    tdir=$(mktemp -d /tmp/rl-tsan.XXXXXX)
    cp "$shim" "$tdir/librl_tsan_thrd.so"
    cp "$root/tests/tsan/suppressions.txt" "$tdir/suppressions.txt"
    for entry in "${tsan_tests[@]}"; do
        test=${entry%%:*}
        limit=${entry##*:}
        dir=$logs/$name/$test
        rm -rf "$dir" "${tdir:?}/$test"
        mkdir -p "$dir" "$tdir/$test"
        t0=$SECONDS
        rc=0
        if [ ! -x "$tsan_dir/tests/e2e/$test" ]; then
            echo "$test: not built in $tsan_dir" >"$dir/test.log"
            rc=127
        else
            (
                cd "$dir"
                export RUNLEDGER_BIN=$tsan_dir/consumer/runledger
                export RL_SOURCE_DIR=$root
                export LD_PRELOAD=$tdir/librl_tsan_thrd.so
                export TSAN_OPTIONS="halt_on_error=1 exitcode=66 second_deadlock_stack=1 suppressions=$tdir/suppressions.txt log_path=$tdir/$test/tsan"
                exec setsid "$tsan_dir/tests/e2e/$test"
            ) >"$dir/test.log" 2>&1 &
            pid=$!
            while kill -0 "$pid" 2>/dev/null; do
                if compgen -G "$tdir/$test/tsan.*" >/dev/null ||
                    [ $((SECONDS - t0)) -ge "$limit" ]; then
                    sleep 2
                    kill -KILL -- "-$pid" 2>/dev/null || true
                    break
                fi
                sleep 1
            done
            wait "$pid" || rc=$?
        fi
        cp "$tdir/$test"/tsan.* "$dir"/ 2>/dev/null || true
        files=$(compgen -G "$dir/tsan.*" | wc -l || true)
        reports=$(cat "$dir"/tsan.* 2>/dev/null | grep -c '^WARNING: ThreadSanitizer' || true)
        if [ "$rc" -eq 0 ] && [ "$files" -eq 0 ]; then
            echo "tsan: $test ok ($((SECONDS - t0))s)"
        else
            echo "tsan: $test FAILED (exit $rc, $reports TSan reports in $files files, $((SECONDS - t0))s; logs in $dir)"
            tail -n 20 "$dir/test.log"
            # The first report names the two accesses and their threads;
            # a file without one holds a TSan crash.
            if [ "$reports" -gt 0 ]; then
                cat "$dir"/tsan.* |
                    sed -n '/^WARNING: ThreadSanitizer/,/^SUMMARY/{p;/^SUMMARY/q}' ||
                    true
            elif [ "$files" -gt 0 ]; then
                cat "$dir"/tsan.* | head -n 40 || true
            fi
        fi
    done 2>&1 | tee "$logs/$name.log" || true
    rm -rf "$tdir"
    # Counted from the log: the loop ran in a pipeline's subshell.
    ok=$(grep -c '^tsan: .* ok (' "$logs/$name.log" || true)
    # A test that printed no verdict (the loop stopped early) failed too.
    bad=$((${#tsan_tests[@]} - ok))
    passed=$((passed + ok))
    failed=$((failed + bad))
    if [ "$bad" -ne 0 ]; then
        status=1
        phases+=("$name: FAILED ($bad of ${#tsan_tests[@]} failed; log $logs/$name.log)")
    else
        phases+=("$name: ok ($ok passed, 0 skipped)")
    fi
}

compat_version=${KAFKA_COMPAT_VERSION:-$(sed -n \
    's:.*<kafka.compat.version>\(.*\)</kafka.compat.version>.*:\1:p' \
    "$root/tests/harness/kafka/pom.xml")}

# Runs one phase and appends its wall time to the summary lines it added,
# so a CI log shows where the minutes go.
timed() {
    local t0=$SECONDS n=${#phases[@]} i
    "$@"
    for ((i = n; i < ${#phases[@]}; i++)); do
        phases[i]="${phases[i]} [$((SECONDS - t0))s]"
    done
}

rm -f "$logs/valgrind.counts"
# The plain pass runs each component as its role's login (the assignment
# holds, exported, for the call only); the passes below keep the one
# migrating user, the single-role setup a deployment may still choose.
RL_TEST_DB_ROLES=1 timed run_ctest "$build_dir" ctest
# The sanitizer pass runs every test of the C code except two that gain
# nothing from it: the fuzz test builds its own ASan+UBSan targets with
# clang anyway, and the chaos soak repeats, slower, the crash and restart
# paths that the fault tests already run under the sanitizers. Tests of
# what is not our C code (the chart, the image, the Python stub, the
# README) are not rerun either, nor the cluster tests: three brokers and
# their load leave no room on 2 cores for sanitized consumers, and they
# run code the e2e and fault tests already run sanitized. The explorer's
# seeds (label explore) are left out for the chaos soak's reason: they
# repeat, slower, paths the sanitized fault tests run. So are the ledger
# failover tests (label failover): their subject is a standby promoted
# under load, which takes them a minute and a half of waiting; the code
# they reach beyond the others' (a partition read again from its
# consumed position or by time) runs sanitized in
# test_positions_missing_row_judged_by_time.
timed run_ctest "$asan_dir" ctest-asan -LE '^(chaos|cluster|fuzz|helm|image|stub|docs|explore|failover)$'
timed run_valgrind
timed run_tsan
if [ -n "$compat_version" ] && [ "$compat_version" != none ] &&
    [ "$compat_version" != "${KAFKA_VERSION:-}" ]; then
    timed run_kafka_compat "$compat_version"
fi
