# Runledger container image: build with CMake on Debian 13, run on Debian 13
# slim with only the runtime libraries, as UID 10001, without a shell.
#
#   docker build -t runledger:0.1.0 .          # or: podman build ...
#   make image                                 # no daemon, no registry:
#                                              # tests/image/build.sh
#
# Build arguments:
#   VERSION     org.opencontainers.image.version (make image passes the
#               project() VERSION from CMakeLists.txt)
#   SOURCE_URL  org.opencontainers.image.source
#   LICENSES    org.opencontainers.image.licenses (SPDX expression)
#   KEEP_SHELL  1 keeps /bin/sh and bash in the runtime image (debugging);
#               the default 0 removes them, see the runtime stage
#
# The unstripped debug information stays in the build stage:
#   docker build --target build -t runledger-build . and copy
#   /out/debug/runledger.debug out of it.

# --- build stage ------------------------------------------------------------
FROM debian:13 AS build

RUN set -eu; \
    export DEBIAN_FRONTEND=noninteractive; \
    apt-get update; \
    apt-get install -y --no-install-recommends \
        build-essential cmake pkg-config \
        librdkafka-dev libpq-dev libcurl4-openssl-dev libcjson-dev \
        libssl-dev libmicrohttpd-dev; \
    rm -rf /var/lib/apt/lists/*

# Only CMakeLists.txt, common/, consumer/ and schema/ reach the context
# (.dockerignore): what the service build reads, not the tests. One COPY,
# one layer.
COPY . /src/

# RL_WERROR=OFF: -Werror belongs in CI (`make test`), where a new warning
# is caught; an image build on a later trixie point release's compiler
# must not fail on one. RL_FAILPOINTS=OFF: no fault-injection hooks.
RUN set -eu; \
    cmake -S /src -B /tmp/build \
        -DCMAKE_BUILD_TYPE=RelWithDebInfo \
        -DCMAKE_INSTALL_PREFIX=/usr/local \
        -DRL_BUILD_TESTS=OFF \
        -DRL_FAILPOINTS=OFF \
        -DRL_WERROR=OFF; \
    cmake --build /tmp/build --parallel "$(nproc)"; \
    mkdir -p /out/bin /out/debug; \
    objcopy --only-keep-debug /tmp/build/consumer/runledger \
        /out/debug/runledger.debug; \
    objcopy --strip-all --add-gnu-debuglink=/out/debug/runledger.debug \
        /tmp/build/consumer/runledger /out/bin/runledger; \
    /out/bin/runledger version

# --- runtime stage ----------------------------------------------------------
FROM debian:13-slim

ARG KEEP_SHELL=0

# One layer: the runtime libraries, the user, then (unless KEEP_SHELL=1) the
# shells. Nothing in the service runs a shell: the entrypoint is exec-form,
# and no library it uses spawns one in this configuration (librdkafka only
# would for sasl.kerberos.kinit.cmd, i.e. SASL/GSSAPI, which Runledger does
# not configure). Without a shell, `kubectl exec ... sh` finds none, and
# neither does an attacker; dpkg still lists bash/dash as installed, so do not
# `apt-get install` on top of this image (build FROM debian:13-slim instead).
# Debian 13's names: the t64 suffix marks the libraries rebuilt with a 64-bit
# time_t (libcurl4t64, libssl3t64, libmicrohttpd12t64); librdkafka1 (2.8),
# libpq5 (17) and libcjson1 kept theirs. tzdata: the scheduler reads
# schedules' time zones from /usr/share/zoneinfo.
RUN set -eu; \
    export DEBIAN_FRONTEND=noninteractive; \
    apt-get update; \
    apt-get install -y --no-install-recommends \
        librdkafka1 libpq5 libcurl4t64 libcjson1 libssl3t64 libmicrohttpd12t64 \
        ca-certificates tzdata; \
    apt-get clean; \
    rm -rf /var/lib/apt/lists/* /var/log/apt/* /var/log/dpkg.log \
        /var/cache/debconf/*-old /var/lib/dpkg/*-old; \
    groupadd --gid 10001 runledger; \
    useradd --uid 10001 --gid 10001 --no-create-home \
        --home-dir /nonexistent --shell /usr/sbin/nologin runledger; \
    if [ "$KEEP_SHELL" != 1 ]; then \
        rm -f /usr/bin/sh /usr/bin/dash /usr/bin/bash /usr/bin/rbash \
            /usr/bin/bashbug /usr/bin/clear_console; \
    fi

COPY --from=build /out/bin/runledger /usr/local/bin/runledger

# After the RUN, so a new version or source URL re-uses its cached layer.
ARG VERSION=0.1.0
ARG SOURCE_URL=https://example.invalid/runledger
ARG LICENSES=NOASSERTION
LABEL org.opencontainers.image.title="runledger" \
      org.opencontainers.image.description="Runs scheduled AI jobs exactly once in effect: Kafka admission, PostgreSQL ledger, transactional outbox" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.source="${SOURCE_URL}" \
      org.opencontainers.image.licenses="${LICENSES}" \
      org.opencontainers.image.base.name="debian:13-slim"

# Numeric, so Kubernetes' runAsNonRoot can verify it without /etc/passwd.
USER 10001:10001
EXPOSE 9464
ENTRYPOINT ["/usr/local/bin/runledger"]
CMD ["consume"]
