#!/usr/bin/env bash
# Builds the libFuzzer targets in tests/fuzz with clang (whatever compiler
# builds the project) under ASan + UBSan, replays tests/fuzz/regressions,
# then fuzzes each target for a bounded time from a copy of its seed corpus,
# so the repository is never written to.
#
# Fails (exit 1) on any crash, leak, sanitizer report, invariant failure or
# timeout, and also when clang, its fuzzer runtime or a library is missing:
# a fuzz test that could not run must not look like one that passed.
#
# usage: run_fuzz.sh <build-dir>
# environment:
#   RL_FUZZ_CC       compiler with libFuzzer (default: clang)
#   RL_FUZZ_SECONDS  fuzzing time per target in seconds (default: 20)
#   RL_FUZZ_SEED     libFuzzer -seed, to replay a run (default: random; the
#                    seed each target used is printed)
set -euo pipefail

die() {
    echo "run_fuzz.sh: $*" >&2
    exit 1
}

[ $# -eq 1 ] || die "usage: run_fuzz.sh <build-dir>"
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
mkdir -p "$1" || die "could not create build directory $1"
build=$(cd "$1" && pwd)
cc=${RL_FUZZ_CC:-clang}
seconds=${RL_FUZZ_SECONDS:-20}
case $seconds in
'' | *[!0-9]*) die "RL_FUZZ_SECONDS must be a whole number, not '$seconds'" ;;
esac

command -v "$cc" >/dev/null 2>&1 ||
    die "$cc not found: the fuzz targets need clang with libFuzzer" \
        "(Debian: apt-get install clang libclang-rt-14-dev)"
command -v pkg-config >/dev/null 2>&1 || die "pkg-config not found"
dep_cflags=$(pkg-config --cflags libcjson libcrypto) ||
    die "pkg-config knows no libcjson or libcrypto"
dep_libs=$(pkg-config --libs libcjson libcrypto)

# The parsers under test and only what they need (event.c uses json, runid,
# timefmt, err and buf; none of them logs).
lib_sources="event runid timefmt json err buf"
targets="fuzz_event fuzz_time fuzz_canonical_json"
san="-fsanitize=address,undefined -fno-sanitize-recover=all"
# Arrays, not strings: the clone's path may hold a space.
# shellcheck disable=SC2206 # the flags themselves are words
cflags=(-std=c11 -D_POSIX_C_SOURCE=200809L -g -O1 -fno-omit-frame-pointer
    $san "-I$root/common/include" $dep_cflags)
warnings="-Wall -Wextra -Wpedantic -Wshadow -Wstrict-prototypes
    -Wmissing-prototypes -Wformat=2 -Wvla"

rm -rf "${build:?}/obj" "${build:?}/bin" "${build:?}/corpus" \
    "${build:?}/artifacts" "${build:?}/logs"
mkdir -p "$build/obj" "$build/bin" "$build/corpus" "$build/artifacts" \
    "$build/logs"

# Without the runtime (libclang-rt-*-dev) clang compiles but cannot link.
printf '%s\n' '#include <stddef.h>' '#include <stdint.h>' \
    'int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n);' \
    'int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n)' \
    '{ (void)d; (void)n; return 0; }' >"$build/obj/probe.c"
"$cc" -fsanitize=fuzzer,address,undefined "$build/obj/probe.c" \
    -o "$build/obj/probe" >"$build/logs/probe.log" 2>&1 || {
    cat "$build/logs/probe.log" >&2
    die "$cc cannot link -fsanitize=fuzzer,address,undefined: the libFuzzer" \
        "runtime is missing (Debian: apt-get install libclang-rt-14-dev)"
}

start=$(date +%s)
echo "run_fuzz.sh: building with $("$cc" --version | head -n 1)"
objs=()
for src in $lib_sources; do
    # fuzzer-no-link: coverage of the parsers is what guides the fuzzer.
    # shellcheck disable=SC2086
    "$cc" "${cflags[@]}" $warnings -fsanitize=fuzzer-no-link \
        -c "$root/common/src/$src.c" -o "$build/obj/$src.o" ||
        die "could not compile common/src/$src.c"
    objs+=("$build/obj/$src.o")
done
for t in $targets; do
    # shellcheck disable=SC2086
    "$cc" "${cflags[@]}" $warnings -Werror -fsanitize=fuzzer \
        "$here/$t.c" "${objs[@]}" $dep_libs -o "$build/bin/$t" ||
        die "could not build $t"
done

export ASAN_OPTIONS="detect_leaks=1:symbolize=1:${ASAN_OPTIONS:-}"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1:${UBSAN_OPTIONS:-}"

# A report that did not stop the process still fails the run.
sanitizer_report() {
    grep -E -q 'ERROR: (AddressSanitizer|LeakSanitizer|libFuzzer)|runtime error:|invariant failed|SUMMARY: (AddressSanitizer|UndefinedBehaviorSanitizer|libFuzzer)' "$1"
}

failed=0
summary=""
for t in $targets; do
    case $t in
    fuzz_event) max_len=70000 dict=json.dict ;;
    fuzz_canonical_json) max_len=8192 dict=json.dict ;;
    fuzz_time) max_len=256 dict=time.dict ;;
    esac
    log="$build/logs/$t.log"

    # Inputs that once broke a parser must keep passing.
    regressions=()
    if [ -d "$here/regressions/$t" ]; then
        mapfile -t regressions < <(find "$here/regressions/$t" -type f | sort)
    fi
    if [ "${#regressions[@]}" -gt 0 ]; then
        rlog="$build/logs/$t.regressions.log"
        if ! "$build/bin/$t" -rss_limit_mb=1024 -timeout=5 \
            "${regressions[@]}" >"$rlog" 2>&1 || sanitizer_report "$rlog"; then
            tail -n 60 "$rlog" >&2
            echo "run_fuzz.sh: $t FAILED on tests/fuzz/regressions/$t" >&2
            failed=1
            continue
        fi
        echo "run_fuzz.sh: $t: ${#regressions[@]} regression input(s) pass"
    fi

    cp -R "$here/corpus/$t" "$build/corpus/$t" ||
        die "no seed corpus tests/fuzz/corpus/$t"
    seed_opt=""
    [ -n "${RL_FUZZ_SEED:-}" ] && seed_opt="-seed=$RL_FUZZ_SEED"
    rc=0
    # shellcheck disable=SC2086
    "$build/bin/$t" -max_total_time="$seconds" -rss_limit_mb=1024 \
        -timeout=5 -max_len="$max_len" -dict="$here/$dict" \
        -print_final_stats=1 -artifact_prefix="$build/artifacts/$t-" \
        $seed_opt "$build/corpus/$t" >"$log" 2>&1 || rc=$?

    seed=$(sed -n 's/^INFO: Seed: \([0-9]*\).*/\1/p' "$log" | head -n 1)
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
    rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log")
    units=$(sed -n 's/^stat::new_units_added: *//p' "$log")
    rss=$(sed -n 's/^stat::peak_rss_mb: *//p' "$log")
    line="$t: ${execs:-?} runs, ${rate:-?} exec/s, ${units:-?} new units, peak ${rss:-?} MB, seed ${seed:-?}"
    if [ "$rc" -ne 0 ] || sanitizer_report "$log" || [ -z "$execs" ]; then
        tail -n 80 "$log" >&2
        echo "run_fuzz.sh: $t FAILED (exit $rc); artifacts:" >&2
        ls -l "$build/artifacts" >&2
        echo "run_fuzz.sh: replay with: $build/bin/$t <artifact>;" \
            "rerun with RL_FUZZ_SEED=${seed:-?}" >&2
        failed=1
        line="$line FAILED"
    fi
    echo "run_fuzz.sh: $line"
    summary="$summary$line"$'\n'
done

echo "run_fuzz.sh: ${seconds}s per target, $(($(date +%s) - start))s in all"
printf '%s' "$summary"
if [ "$failed" -ne 0 ]; then
    echo "run_fuzz.sh: FAILED (logs in $build/logs)" >&2
    exit 1
fi
echo "run_fuzz.sh: all targets clean"
