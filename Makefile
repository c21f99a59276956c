# Runledger — the everyday entry points.
#
#   make demo           build, start throwaway services, run the story, stop them
#   make test           everything CI runs on Debian 12 (.ci/run runs it, then
#                       test-trixie)
#   make test-trixie    the plain build and its ctest suite again inside a
#                       Debian 13 root (its librdkafka, libpq, curl)
#   make test-k8s       the Helm chart on a real single-node Kubernetes
#                       (tests/k8s/run.sh)
#   make build          plain build in $(BUILD_DIR)
#   make build-asan     AddressSanitizer + UBSan build in $(ASAN_BUILD_DIR)
#   make build-tsan     ThreadSanitizer build of what ctest-tsan runs, in
#                       $(TSAN_BUILD_DIR)
#   make explore        the seeded fault explorer: seeds SEED, SEED+1, ... for
#                       MINUTES, each a drawn workload under drawn faults on
#                       private services, checked (tests/explore/README.md)
#   make services-up    PostgreSQL, Kafka, stub model; writes $(SERVICES_ENV)
#   make services-down  stops them (idempotent)
#   make format-check   clang-format over common/ consumer/ tests/
#
# Every variable below can be overridden: `make test JOBS=4 BUILD_DIR=out`.

BUILD_DIR      ?= build
ASAN_BUILD_DIR ?= build-asan
TSAN_BUILD_DIR ?= build-tsan
TRIXIE_BUILD_DIR ?= build-trixie
BUILD_TYPE     ?= RelWithDebInfo
JOBS           ?= 2
CMAKE          ?= cmake
CMAKE_ARGS     ?=
CLANG_FORMAT   ?= clang-format
FORMAT_DIRS    ?= common consumer tests
SERVICES_DIR   ?= $(BUILD_DIR)/services
SERVICES_ENV   ?= $(BUILD_DIR)/services.env

HARNESS := tests/harness

# The nested make that cmake runs need not announce every directory.
MAKEFLAGS += --no-print-directory

# Downloaded and built tools (Kafka jars, helm, kubeconform, schemas,
# oauth2-proxy) are cached per user, like ~/.m2, so a fresh clone on the
# same machine does not fetch and build them again; a fresh machine fills
# the cache on first use.
RL_CACHE_DIR   ?= $(HOME)/.cache/runledger

# The Kafka broker the services run; empty means kafka.version in
# tests/harness/kafka/pom.xml. `make test` also runs the Kafka-facing tests
# against KAFKA_COMPAT_VERSION (empty: the pom's kafka.compat.version; none:
# skipped). docs/compatibility.md lists the versions and what was tested.
KAFKA_VERSION        ?=
KAFKA_COMPAT_VERSION ?=

# The harness scripts read these; exported so every recipe agrees on them.
export BUILD_DIR ASAN_BUILD_DIR TSAN_BUILD_DIR TRIXIE_BUILD_DIR JOBS RL_CACHE_DIR \
	KAFKA_VERSION KAFKA_COMPAT_VERSION
export RL_SERVICES_DIR := $(abspath $(SERVICES_DIR))
export RL_SERVICES_ENV := $(abspath $(SERVICES_ENV))

# deps must finish before a build starts, and two cmake builds on two cores
# gain nothing: targets run one after another even under `make -j`.
.NOTPARALLEL:

.PHONY: all deps build build-asan build-tsan services-up services-down \
	format-check test test-trixie test-k8s demo explore bench image image-smoke schema clean \
	distclean interop

all: build

deps:
	$(HARNESS)/deps.sh
	tests/helm/check.sh --tools-only
	$(HARNESS)/oauth2_proxy.sh install

build:
	$(CMAKE) -S . -B $(BUILD_DIR) -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) $(CMAKE_ARGS)
	$(CMAKE) --build $(BUILD_DIR) -j $(JOBS)

build-asan:
	$(CMAKE) -S . -B $(ASAN_BUILD_DIR) -DCMAKE_BUILD_TYPE=Debug \
		'-DRL_SANITIZE=address;undefined' $(CMAKE_ARGS)
	$(CMAKE) --build $(ASAN_BUILD_DIR) -j $(JOBS)

# Only what run_tests.sh's ctest-tsan phase runs: the consumer, two e2e
# tests and the thrd_create shim (tests/tsan/). A whole TSan build would
# triple the build time for executables no phase runs.
TSAN_TARGETS ?= runledger rl_tsan_thrd test_e2e_exactly_once \
	test_e2e_heartbeat_keeps_leases

build-tsan:
	$(CMAKE) -S . -B $(TSAN_BUILD_DIR) -DCMAKE_BUILD_TYPE=RelWithDebInfo \
		-DRL_SANITIZE=thread $(CMAKE_ARGS)
	$(CMAKE) --build $(TSAN_BUILD_DIR) -j $(JOBS) --target $(TSAN_TARGETS)

services-up:
	$(HARNESS)/services.sh up

services-down:
	$(HARNESS)/services.sh down

format-check:
	@files=$$(find $(FORMAT_DIRS) -path '*/build*' -prune -o -type f \
		\( -name '*.c' -o -name '*.h' \) -print | sort); \
	if [ -z "$$files" ]; then echo "format-check: no C files"; exit 0; fi; \
	$(CLANG_FORMAT) --dry-run --Werror $$files && \
	echo "format-check: $$(echo $$files | wc -w) files formatted"

# format-check runs first: it fails in a second instead of after two builds.
# run_tests.sh starts the services, runs both builds' suites, valgrind and
# the TSan e2e tests, and stops the services on every way out; its exit code
# is the verdict.
test: deps format-check build build-asan build-tsan
	$(HARNESS)/run_tests.sh

# `make test-trixie`: the suite against Debian 13's libraries on this
# Debian 12 machine (tests/trixie/run.sh): a debootstrap root cached under
# $(RL_CACHE_DIR)/trixie (about a minute the first time), a plain build in
# $(TRIXIE_BUILD_DIR) inside it, ctest there against the services on the
# host. The services it starts it stops; those already up stay.
test-trixie: deps
	tests/trixie/run.sh

# `make test-k8s`: a real single-node Kubernetes (v1.34.4 built from the
# Go module proxy, etcd/containerd/runc/CNI from Debian, cached under
# $(RL_CACHE_DIR)/k8s-<version>) on a bridge of its own in 198.18.0.0/15;
# the image `make image` builds, and a second one with a test-only
# migration for the upgrade; the chart installed as its README's quick
# start says; install, disruption, upgrade/rollback, security and
# NetworkPolicy tests, the last with kube-router's policy controller
# (tests/k8s/run.sh).
# Everything it starts or changes on the machine it stops and restores.
test-k8s: deps
	tests/k8s/run.sh

demo: deps build
	$(HARNESS)/demo.sh

# `make explore SEED=S MINUTES=M [WINDOW=SECONDS]`: seeds S, S+1, ... until
# M minutes passed (at least one seed), one figure line each; stops at the
# first seed whose history breaks a rule and prints how to repeat it. Not
# part of `make test` beyond the three seeds of `ctest -L explore`.
SEED    ?= 20261206
MINUTES ?= 5
WINDOW  ?= 40
explore: build
	SEED=$(SEED) MINUTES=$(MINUTES) WINDOW=$(WINDOW) tests/explore/explore.sh

# `make bench`: throughput, overhead and footprint against the PostgreSQL
# ceiling and against peers, on private services (tests/bench/README.md).
# Not part of `make test`. Takes ~5-10 minutes on 2 cores.
bench:
	tests/bench/bench.sh

# `make interop`: the e2e scenario through a real LiteLLM proxy (pinned
# version, private venv under $(RL_CACHE_DIR)/interop/) in front of the
# stub model, on private services; reports what the gateway does to
# retries, request ids and Idempotency-Key (tests/interop/README.md,
# docs/gateways.md). Not part of `make test`: it takes minutes.
interop: deps build
	tests/interop/run.sh

# --- container image (tests/image/) --------------------------------------
# `make image`: builds the top-level Dockerfile with buildah (no Docker
# daemon, no container registry: the Debian 13 base images are made locally
# with debootstrap), names the image localhost/runledger:<version> (the
# chart's default image), writes build/runledger-<version>.oci.tar and runs the
# smoke test against the image. `make image-smoke` re-runs only the smoke
# test. Both start the test services when build/services.env is missing and
# never stop them. `ctest -L image` (part of `make test` when buildah is
# installed) builds if the sources changed, then smoke-tests.
image:
	tests/image/build.sh
image-smoke:
	tests/image/smoke.sh

# `make schema`: regenerates schema/current.sql, the schema all
# migrations build, from a fresh schema in build/services.env's PostgreSQL
# when that file exists, else in a throwaway one (schema/README.md).
schema: build
	@if [ -f $(SERVICES_ENV) ]; then . $(abspath $(SERVICES_ENV)); export DATABASE_URL; fi; \
	RUNLEDGER_BIN=$(BUILD_DIR)/consumer/runledger $(HARNESS)/schema_dump.sh

clean: services-down
	rm -rf $(BUILD_DIR) $(ASAN_BUILD_DIR) $(TSAN_BUILD_DIR) $(TRIXIE_BUILD_DIR)

# Also forgets the caches (Kafka jars, helm, schemas, base images, the
# Debian 13 root).
distclean: clean
	rm -rf .cache $(RL_CACHE_DIR)
