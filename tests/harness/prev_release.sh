#!/usr/bin/env bash
# prev_release.sh OUTDIR [TAG] — builds the `runledger` of a tagged release
# (default: the newest v* tag reachable from HEAD) into OUTDIR/TAG and
# prints the binary's path. A binary already built there is reused, so a
# rerun costs nothing. The source comes from `git archive` of the tag: no
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
if [ -z "$tag" ]; then
    tag=$(git -C "$src" describe --tags --abbrev=0 --match 'v*' HEAD 2>/dev/null) ||
        die "no v* tag reachable from HEAD (a shallow clone without tags?)"
fi
git -C "$src" rev-parse -q --verify "refs/tags/$tag" >/dev/null || die "no tag $tag"

dest=$out/$tag
bin=$dest/build/consumer/runledger
if [ -x "$bin" ]; then
    echo "$bin"
    exit 0
fi
rm -rf "$dest"
mkdir -p "$dest/src"
git -C "$src" archive --format=tar "$tag" | tar -x -C "$dest/src"
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
