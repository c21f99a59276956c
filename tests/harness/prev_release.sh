#!/usr/bin/env bash
# prev_release.sh OUTDIR [REV] — builds the `runledger` of a release (default:
# the last one, named with its commit in tests/harness/last_release) into
# OUTDIR/NAME and prints the binary's path. A binary already built there is reused, so a
# rerun costs nothing. The source comes from `git archive` of the commit: no
# worktree is registered and the checkout is not touched.
set -euo pipefail

prog=prev_release.sh
die() {
    echo "$prog: $*" >&2
    exit 1
}
[ $# -ge 1 ] && [ $# -le 2 ] || {
    echo "usage: $prog OUTDIR [TAG]" >&2
    exit 2
}
src=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
out=$(realpath -m -- "$1")
tag=${2:-}
rev=$tag
if [ -z "$tag" ]; then
    # The commit, not the tag: a clone of main need not carry tags.
    read -r tag rev < <(grep -v '^#' "$src/tests/harness/last_release")
fi
git -C "$src" rev-parse -q --verify "$rev^{commit}" >/dev/null ||
    die "$rev ($tag) is not in this repository's history (a shallow clone?)"

dest=$out/$tag
bin=$dest/build/consumer/runledger
if [ -x "$bin" ]; then
    echo "$bin"
    exit 0
fi
rm -rf "$dest"
mkdir -p "$dest/src"
git -C "$src" archive --format=tar "$rev" | tar -x -C "$dest/src"
# The release's own build, warnings as errors as it shipped; only the
# binary, at a low priority (the machine's cores are shared).
cmake -S "$dest/src" -B "$dest/build" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    >"$dest/cmake.log" 2>&1 || {
    tail -n 20 "$dest/cmake.log" >&2
    die "cmake of $tag failed"
}
nice cmake --build "$dest/build" --target runledger -j2 >"$dest/build.log" 2>&1 || {
    tail -n 20 "$dest/build.log" >&2
    die "build of $tag failed"
}
[ -x "$bin" ] || die "build of $tag made no $bin"
echo "$bin"
