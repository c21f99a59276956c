#!/usr/bin/env bash
# deps.sh — installs what building and testing Runledger needs on Debian 12,
# and nothing that is already there, then resolves the Kafka broker's jars
# once into .cache/kafka-<version>/ in the repository.
#
# Idempotent: a second run installs nothing, runs no `apt-get update` and
# resolves no jars. Runs as root, or through sudo otherwise.
#
# Environment:
#   RL_DEPS_SKIP_APT=1   only resolve the Kafka jars (no package checks)
#   KAFKA_LIBS_DIR       where the jars go (default .cache/kafka-3.9.1)
set -euo pipefail

die() {
    echo "deps.sh: $*" >&2
    exit 1
}

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
kafka_version=3.9.1
pom="$root/tests/harness/kafka/pom.xml"
libs_dir=${KAFKA_LIBS_DIR:-${RL_CACHE_DIR:-$root/.cache}/kafka-$kafka_version}

packages=(
    build-essential cmake pkg-config
    librdkafka-dev libcjson-dev libmicrohttpd-dev libcurl4-openssl-dev
    libssl-dev libpq-dev postgresql-15
    clang clang-format libclang-rt-14-dev valgrind kcat python3
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

# The stamp records the pom it was resolved from: editing the pom (another
# Kafka version, another dependency) resolves the jars again.
resolve_kafka_jars() {
    local stamp="$libs_dir/.complete" want tmp count

    [ -f "$pom" ] || die "missing $pom"
    want=$(sha256sum "$pom" | cut -d' ' -f1)
    if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
        echo "deps.sh: kafka jars present in ${libs_dir#"$root"/}"
        return
    fi
    command -v mvn >/dev/null 2>&1 || die "mvn is missing (run as root first)"

    echo "deps.sh: resolving kafka $kafka_version jars into ${libs_dir#"$root"/}"
    mkdir -p "$(dirname "$libs_dir")"
    tmp=$(mktemp -d "$libs_dir.tmp.XXXXXX")
    # A half-resolved folder must never look complete: resolve aside, check,
    # then swap it in.
    if ! mvn -q -B -Dstyle.color=never -f "$pom" dependency:copy-dependencies \
        -DoutputDirectory="$tmp" -DincludeScope=runtime >"$tmp.log" 2>&1; then
        cat "$tmp.log" >&2
        rm -rf "$tmp" "$tmp.log"
        die "could not resolve the kafka jars with maven (output above)"
    fi
    rm -f "$tmp.log"
    for jar in "kafka_2.13-$kafka_version.jar" "kafka-clients-$kafka_version.jar" \
        "kafka-server-$kafka_version.jar" "kafka-metadata-$kafka_version.jar"; do
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
resolve_kafka_jars
