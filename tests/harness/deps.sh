#!/usr/bin/env bash
# deps.sh — installs what building and testing Runledger needs on Debian 12,
# and nothing that is already there, then resolves the jars of the Kafka
# brokers `make test` runs (KAFKA_VERSION and the older line it tests too,
# see tests/harness/kafka/pom.xml) once each into
# $RL_CACHE_DIR/kafka-<version>/ (default .cache/ in the repository).
#
# Idempotent: a second run installs nothing, runs no `apt-get update` and
# resolves no jars. Runs as root, or through sudo otherwise.
#
# Environment:
#   RL_DEPS_SKIP_APT=1   only resolve the Kafka jars (no package checks)
#   KAFKA_VERSION        the broker to resolve (default: the pom's
#                        kafka.version)
#   KAFKA_COMPAT_VERSION the older broker resolved beside it (default: the
#                        pom's kafka.compat.version; "none" for none)
#   KAFKA_LIBS_DIR       where KAFKA_VERSION's jars go (default
#                        $RL_CACHE_DIR/kafka-<version>)
set -euo pipefail

die() {
    echo "deps.sh: $*" >&2
    exit 1
}

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
pom="$root/tests/harness/kafka/pom.xml"
cache=${RL_CACHE_DIR:-$root/.cache}

# A property of the pom, e.g. kafka.version.
pom_property() {
    sed -n "s:.*<$1>\(.*\)</$1>.*:\1:p" "$pom"
}

packages=(
    build-essential cmake pkg-config
    librdkafka-dev libcjson-dev libmicrohttpd-dev libcurl4-openssl-dev
    libssl-dev libpq-dev postgresql-15 pgbouncer
    clang clang-format libclang-rt-14-dev valgrind kcat python3
    chromium chromium-driver
)

as_root() {
    if [ "$(id -u)" -eq 0 ]; then
        "$@"
    elif command -v sudo >/dev/null 2>&1; then
        sudo "$@"
    else
        die "must run as root or have sudo to run: $*"
    fi
}

# Major version of the `java` on PATH, or 0 when there is none. Handles both
# "17.0.15" and the old "1.8.0_392" numbering.
java_major() {
    local line version
    command -v java >/dev/null 2>&1 || {
        echo 0
        return
    }
    line=$(java -version 2>&1 | head -n 1) || true
    version=$(printf '%s\n' "$line" | sed -n 's/.*version "\([^"]*\)".*/\1/p')
    case "$version" in
    1.*) version=${version#1.} ;;
    esac
    version=${version%%[!0-9]*}
    echo "${version:-0}"
}

install_packages() {
    local wanted=("${packages[@]}") missing=() pkg status

    if [ "$(java_major)" -lt 17 ]; then
        wanted+=(default-jre-headless)
    fi
    command -v mvn >/dev/null 2>&1 || wanted+=(maven)

    for pkg in "${wanted[@]}"; do
        status=$(dpkg-query -W -f='${db:Status-Status}' "$pkg" 2>/dev/null) ||
            status=
        [ "$status" = installed ] || missing+=("$pkg")
    done
    if [ ${#missing[@]} -eq 0 ]; then
        echo "deps.sh: all packages present"
        return
    fi

    echo "deps.sh: installing ${missing[*]}"
    as_root env DEBIAN_FRONTEND=noninteractive apt-get update -q ||
        die "apt-get update failed"
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q \
        --no-install-recommends "${missing[@]}" ||
        die "apt-get install failed for: ${missing[*]}"

    if [ "$(java_major)" -lt 17 ]; then
        die "java >= 17 is needed for the Kafka broker; found $(java_major)"
    fi
}

# resolve_kafka_jars VERSION DIR. The stamp records the pom and the
# version it was resolved from: editing the pom (another dependency)
# resolves the jars again. Each version has a folder of its own, so brokers
# of two versions never share or overwrite each other's jars.
resolve_kafka_jars() {
    local version=$1 libs_dir=$2 stamp="$2/.complete" want tmp count logging

    [ -f "$pom" ] || die "missing $pom"
    case "$version" in
    [0-9]*.[0-9]*.[0-9]*) ;;
    *) die "not a kafka version: \"$version\" (e.g. 4.1.1)" ;;
    esac
    want="$(sha256sum "$pom" | cut -d' ' -f1) $version"
    if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
        echo "deps.sh: kafka $version jars present in ${libs_dir#"$root"/}"
        return
    fi
    command -v mvn >/dev/null 2>&1 || die "mvn is missing (run as root first)"
    # The SLF4J binding the version's broker logs through.
    case "$version" in
    [0-3].*) logging=reload4j ;;
    *) logging=log4j2 ;;
    esac

    echo "deps.sh: resolving kafka $version jars into ${libs_dir#"$root"/}"
    mkdir -p "$(dirname "$libs_dir")"
    tmp=$(mktemp -d "$libs_dir.tmp.XXXXXX")
    # A half-resolved folder must never look complete: resolve aside, check,
    # then swap it in.
    if ! mvn -q -B -Dstyle.color=never -f "$pom" dependency:copy-dependencies \
        -Dkafka.version="$version" -Dkafka.logging="$logging" \
        -DoutputDirectory="$tmp" -DincludeScope=runtime >"$tmp.log" 2>&1; then
        cat "$tmp.log" >&2
        rm -rf "$tmp" "$tmp.log"
        die "could not resolve the kafka $version jars with maven (output above)"
    fi
    rm -f "$tmp.log"
    for jar in "kafka_2.13-$version.jar" "kafka-clients-$version.jar" \
        "kafka-server-$version.jar" "kafka-metadata-$version.jar"; do
        if [ ! -s "$tmp/$jar" ]; then
            rm -rf "$tmp"
            die "maven finished but $jar is missing"
        fi
    done
    count=$(find "$tmp" -maxdepth 1 -name '*.jar' | wc -l)
    rm -rf "$libs_dir"
    mv "$tmp" "$libs_dir"
    echo "$want" >"$stamp"
    echo "deps.sh: $count jars resolved"
}

if [ "${RL_DEPS_SKIP_APT:-0}" != 1 ]; then
    command -v dpkg-query >/dev/null 2>&1 ||
        die "dpkg-query not found: this script expects Debian 12"
    install_packages
fi
kafka_version=${KAFKA_VERSION:-$(pom_property kafka.version)}
compat_version=${KAFKA_COMPAT_VERSION:-$(pom_property kafka.compat.version)}
resolve_kafka_jars "$kafka_version" "${KAFKA_LIBS_DIR:-$cache/kafka-$kafka_version}"
if [ "$compat_version" != none ] && [ "$compat_version" != "$kafka_version" ]; then
    resolve_kafka_jars "$compat_version" "$cache/kafka-$compat_version"
fi
