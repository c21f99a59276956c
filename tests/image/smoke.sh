#!/usr/bin/env bash
# smoke.sh [--build] — proves the image `make image` built
# (localhost/runledger:<version> in buildah's storage, see lib.sh) works, by
# running it with buildah (chroot isolation: the host's network, no daemon):
#
#   0. the OCI archive names the image localhost/runledger:<version>, the
#      chart's default image, which `ctr images import` keeps as is
#   1. the image config: User 10001:10001, entrypoint
#      /usr/local/bin/runledger, cmd consume, port 9464, OCI labels (version
#      = the CMake project version); no shell in the image
#   2. `runledger version` prints the project version; `runledger id` prints
#      the seed vector's run ID
#   3. a command in the image runs as UID/GID 10001 without asking for it
#   4. `runledger migrate` then `runledger consume`, in the image, against
#      the local test services (build/services.env: PostgreSQL, Kafka, the
#      stub model) on a schema and topics of their own: 5 schedule events
#      produced with kcat end as 5 completed runs, their 10 notifications
#      (2 channels) on the notification topic and an empty outbox; the
#      consume process runs as UID 10001 inside the image's root; SIGTERM
#      stops it with exit status 0
#
# --build runs build.sh --no-smoke first (CTest does, so `make test` checks
# the current sources, not an old image). Exit status 77 (skipped) only when
# buildah is not installed: presence of buildah decides, RL_REQUIRE_SERVICES
# does not. When build/services.env is missing, tests/harness/services.sh up
# starts the services (and leaves them running, as `make test` does); this
# script never stops them. Its own schema is dropped at the end; its topics
# (rlimg_*) stay, as the e2e tests' do.
set -euo pipefail

prog=smoke.sh
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

if ! command -v buildah >/dev/null 2>&1; then
    echo "$prog: buildah not installed: skipped (make image installs it)"
    exit 77
fi
if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null 2>&1 || {
        echo "$prog: needs root (buildah's rootful vfs storage)" >&2
        exit 1
    }
    exec sudo --preserve-env=RL_IMAGE_STORAGE,RL_IMAGE_RUNROOT,RL_IMAGE_REGISTRY,RL_IMAGE_NAME,RL_IMAGE_TAG,RL_DEBIAN_MIRROR,RL_DEBIAN_SECURITY_MIRROR,RL_SERVICES_ENV,RL_SMOKE_TIMEOUT \
        "$0" "$@"
fi

# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$here/lib.sh"

case "${1:-}" in
'') ;;
--build) "$here/build.sh" --no-smoke ;;
*)
    echo "usage: $prog [--build]" >&2
    exit 2
    ;;
esac

t0=$SECONDS
fails=0
ok() { echo "ok - $*"; }
not_ok() {
    echo "not ok - $*"
    fails=$((fails + 1))
}
die() {
    echo "$prog: $*" >&2
    exit 1
}
check_eq() { # check_eq WHAT GOT WANT
    if [ "$2" = "$3" ]; then ok "$1: $2"; else not_ok "$1: got \"$2\", want \"$3\""; fi
}

rl_image_exists "$rl_image" || die "no image $rl_image in $rl_storage: run make image"

name=rlimg_$(date +%s)_$$
ctr=
consume_pid=
bud_pid=
schema_made=0
logdir=$rl_root/build/image-smoke
mkdir -p "$logdir"
log=$logdir/$name.consume.log
# The processes under one PID (buildah run with chroot isolation shares the
# host's PID namespace).
descendants() {
    local p
    for p in $(ps -o pid= --ppid "$1" 2>/dev/null); do
        echo "$p"
        descendants "$p"
    done
}
cleanup() {
    local rc=$? p
    # Only what this script started: its `buildah run` and what runs under it.
    if [ -n "$bud_pid" ]; then
        for p in $(descendants "$bud_pid"); do kill -KILL "$p" 2>/dev/null || true; done
        kill -KILL "$bud_pid" 2>/dev/null || true
        wait "$bud_pid" 2>/dev/null || true
    fi
    [ -z "$ctr" ] || bh rm "$ctr" >/dev/null 2>&1 || true
    if [ "$schema_made" -eq 1 ]; then
        psql "$DATABASE_URL" -qAt -v ON_ERROR_STOP=1 \
            -c "DROP SCHEMA IF EXISTS $name CASCADE" >/dev/null 2>&1 || true
    fi
    exit "$rc"
}
trap cleanup EXIT

# --- 0. the archive's name ---------------------------------------------------
[ -f "$rl_oci_archive" ] || die "no $rl_oci_archive: run make image"
archive_names=$(tar -xOf "$rl_oci_archive" index.json | python3 -c '
import json, sys
print(" ".join(m.get("annotations", {}).get("org.opencontainers.image.ref.name", "")
               for m in json.load(sys.stdin)["manifests"]))')
check_eq "OCI archive image name" "$archive_names" "$rl_image"

# --- 1. the image's configuration -------------------------------------------
fmt() { bh inspect --type image --format "$1" "$rl_image"; }
check_eq "config User" "$(fmt '{{.OCIv1.Config.User}}')" "10001:10001"
check_eq "config Entrypoint" "$(fmt '{{range .OCIv1.Config.Entrypoint}}{{.}} {{end}}')" \
    "/usr/local/bin/runledger "
check_eq "config Cmd" "$(fmt '{{range .OCIv1.Config.Cmd}}{{.}} {{end}}')" "consume "
# shellcheck disable=SC2016 # a Go template, not shell
check_eq "config ExposedPorts" "$(fmt '{{range $p, $v := .OCIv1.Config.ExposedPorts}}{{$p}} {{end}}')" \
    "9464/tcp "
for label in version source title licenses; do
    value=$(fmt "{{index .OCIv1.Config.Labels \"org.opencontainers.image.$label\"}}")
    if [ "$label" = version ]; then
        check_eq "label org.opencontainers.image.version" "$value" "$rl_version"
    elif [ -n "$value" ]; then
        ok "label org.opencontainers.image.$label: $value"
    else
        not_ok "label org.opencontainers.image.$label missing"
    fi
done

ctr=$(bh from --pull=never --name "$name" "$rl_image")
mnt=$(bh mount "$ctr")
shells=
for f in bin/sh bin/bash bin/dash usr/bin/sh usr/bin/bash usr/bin/dash; do
    [ ! -e "$mnt/$f" ] && [ ! -L "$mnt/$f" ] || shells="$shells /$f"
done
if [ -z "$shells" ]; then ok "no shell in the image"; else not_ok "shells in the image:$shells"; fi
bin_kib=$(du -k "$mnt/usr/local/bin/runledger" | cut -f1)
if ! command -v readelf >/dev/null 2>&1; then
    ok "/usr/local/bin/runledger: $bin_kib KiB (readelf missing: strip not checked)"
elif readelf -S "$mnt/usr/local/bin/runledger" | grep -q '\.symtab'; then
    not_ok "/usr/local/bin/runledger is not stripped"
else
    ok "/usr/local/bin/runledger: stripped, $bin_kib KiB"
fi
bh umount "$ctr" >/dev/null

# --- 2. and 3. commands in the image ----------------------------------------
brun() { bh run --isolation chroot "$@"; }
check_eq "runledger version" "$(brun "$ctr" -- /usr/local/bin/runledger version 2>&1)" \
    "runledger $rl_version"
check_eq "runledger id (seed vector)" \
    "$(brun "$ctr" -- /usr/local/bin/runledger id --job competitor-summary \
        --tenant workspace-acme --at 2026-08-07T09:00:00+00:00 --version v1 2>&1)" \
    70130901deca1ba5c508cd0730a67be6cb7bf82aa4ad3d766d68a219acb42719
check_eq "uid:gid of a command in the image" \
    "$(brun "$ctr" -- id -u 2>&1):$(brun "$ctr" -- id -g 2>&1)" "10001:10001"

# --- 4. consume against the test services -----------------------------------
envfile=${RL_SERVICES_ENV:-$rl_root/build/services.env}
if [ ! -f "$envfile" ]; then
    echo "$prog: $envfile missing: starting the test services"
    "$rl_root/tests/harness/services.sh" up
fi
# shellcheck disable=SC1090
. "$envfile"
for v in DATABASE_URL KAFKA_BOOTSTRAP_SERVERS MODEL_BASE_URL RL_SERVICES_DIR; do
    [ -n "${!v:-}" ] || die "$v not set by $envfile"
done
if ! command -v kcat >/dev/null 2>&1 || ! command -v psql >/dev/null 2>&1; then
    rl_apt_ensure kcat postgresql-client
fi
topics_bin=$RL_SERVICES_DIR/kafka/bin/rl_topics
[ -x "$topics_bin" ] || die "$topics_bin missing (is Kafka up? tests/harness/services.sh up)"

topic=$name.schedules
notify=$name.notifications
dlq=$name.dlq
psql "$DATABASE_URL" -qAt -v ON_ERROR_STOP=1 -c "CREATE SCHEMA $name" >/dev/null
schema_made=1
db_url="$DATABASE_URL$(case "$DATABASE_URL" in *\?*) echo '&' ;; *) echo '?' ;; esac)options=-csearch_path%3D$name"
"$topics_bin" "$KAFKA_BOOTSTRAP_SERVERS" 30000 "$topic:2" "$notify:2" "$dlq:1" >/dev/null
sql() { psql "$DATABASE_URL" -qAt -v ON_ERROR_STOP=1 -c "SET search_path TO $name" -c "$1"; }

envs=(-e "DATABASE_URL=$db_url"
    -e "KAFKA_BOOTSTRAP_SERVERS=$KAFKA_BOOTSTRAP_SERVERS"
    -e "MODEL_BASE_URL=$MODEL_BASE_URL"
    -e "RUNLEDGER_TOPIC=$topic" -e "RUNLEDGER_NOTIFY_TOPIC=$notify"
    -e "RUNLEDGER_DLQ_TOPIC=$dlq" -e "RUNLEDGER_GROUP_ID=$name"
    -e "RUNLEDGER_WORKER_ID=$name-w0" -e "RUNLEDGER_HTTP_PORT=0")

if out=$(brun "${envs[@]}" "$ctr" -- /usr/local/bin/runledger migrate 2>&1); then
    ok "runledger migrate in the image: $(echo "$out" | tail -n 1 | cut -c1-100)"
else
    not_ok "runledger migrate in the image: $out"
    exit 1
fi

events=5
for i in $(seq 1 "$events"); do
    printf 'tenant-%d\t{"job":"%s","tenant":"tenant-%d","scheduled_at":"2026-08-07T%02d:00:00+00:00","version":"v1","input":{"doc":%d},"request":{"model":"stub-1","temperature":0,"messages":[{"role":"user","content":"summarise {{input}}"}]},"notify":["email","slack"]}\n' \
        "$i" "$name" "$i" "$i" "$i"
done | kcat -P -b "$KAFKA_BOOTSTRAP_SERVERS" -t "$topic" -K $'\t' -z none
ok "produced $events schedule events to $topic"

brun "${envs[@]}" "$ctr" -- /usr/local/bin/runledger consume >"$log" 2>&1 &
bud_pid=$!

# The consume process: a descendant of that buildah.
deadline=$((SECONDS + 30))
while [ -z "$consume_pid" ] && [ "$SECONDS" -lt "$deadline" ] && kill -0 "$bud_pid" 2>/dev/null; do
    for p in $(descendants "$bud_pid"); do
        [ "$(cat "/proc/$p/comm" 2>/dev/null)" = runledger ] && consume_pid=$p
    done
    [ -n "$consume_pid" ] || sleep 0.2
done
[ -n "$consume_pid" ] || {
    tail -n 20 "$log" >&2
    die "runledger consume did not start (log: $log)"
}
uids=$(awk '/^Uid:/ { print $2, $3, $4, $5 }' "/proc/$consume_pid/status")
gids=$(awk '/^Gid:/ { print $2, $3, $4, $5 }' "/proc/$consume_pid/status")
check_eq "consume process uid (real, effective, saved, fs)" "$uids" "10001 10001 10001 10001"
check_eq "consume process gid (real, effective, saved, fs)" "$gids" "10001 10001 10001 10001"
proc_root=$(readlink "/proc/$consume_pid/root")
if [ "$proc_root" != / ]; then ok "consume runs inside the image's root ($proc_root)"; else not_ok "consume runs in the host's root"; fi

timeout=${RL_SMOKE_TIMEOUT:-120}
deadline=$((SECONDS + timeout))
completed=0
while [ "$SECONDS" -lt "$deadline" ] && kill -0 "$consume_pid" 2>/dev/null; do
    completed=$(sql "SELECT count(*) FROM runs WHERE status = 'completed'")
    [ "$completed" -lt "$events" ] || break
    sleep 0.5
done
check_eq "completed runs" "$completed" "$events"
# The relay in the same process delivers the outbox (2 channels per run).
outbox=-1
while [ "$SECONDS" -lt "$deadline" ] && kill -0 "$consume_pid" 2>/dev/null; do
    outbox=$(sql "SELECT count(*) FROM outbox")
    [ "$outbox" -ne 0 ] || break
    sleep 0.5
done
check_eq "undelivered outbox rows" "$outbox" 0
check_eq "other runs (not completed)" "$(sql "SELECT count(*) FROM runs WHERE status <> 'completed'")" 0
notifications=$(kcat -C -b "$KAFKA_BOOTSTRAP_SERVERS" -t "$notify" -o beginning -e -q \
    -f '%k\n' 2>/dev/null | grep -c . || true)
check_eq "notifications on $notify" "$notifications" $((events * 2))
want_id=$(brun "$ctr" -- /usr/local/bin/runledger id --job "$name" --tenant tenant-1 \
    --at 2026-08-07T01:00:00+00:00 --version v1 2>&1)
check_eq "run of event 1 under the ID runledger id computes" \
    "$(sql "SELECT count(*) FROM runs WHERE run_id = '$want_id' AND status = 'completed'")" 1

if kill -0 "$consume_pid" 2>/dev/null; then
    kill -TERM "$consume_pid"
    deadline=$((SECONDS + 60))
    while kill -0 "$consume_pid" 2>/dev/null && [ "$SECONDS" -lt "$deadline" ]; do
        sleep 0.2
    done
fi
if kill -0 "$consume_pid" 2>/dev/null; then
    not_ok "consume still running 60 s after SIGTERM"
else
    consume_pid=
    rc=0
    wait "$bud_pid" || rc=$?
    bud_pid=
    check_eq "consume exit status after SIGTERM" "$rc" 0
fi
errors=$(grep -c '"level":"error"' "$log" || true)
check_eq "error lines in the consume log" "$errors" 0

if [ "$fails" -ne 0 ]; then
    echo "--- consume log ($log), last 30 lines:"
    tail -n 30 "$log"
    echo "$prog: $fails check(s) failed in $((SECONDS - t0))s"
    exit 1
fi
rm -f "$log"
echo "$prog: all checks passed in $((SECONDS - t0))s ($rl_image)"
