#!/usr/bin/env bash
# check.sh — the Helm chart lints, renders and validates against the
# Kubernetes API schemas, offline. CTest: helm_chart_renders_and_validates.
#
# Tools (pinned, built once from the Go module proxy into .cache/bin/):
#   helm        helm.sh/helm/v3/cmd/helm@v3.21.4, with the ldflags of helm's
#               own Makefile (version, and the default Kubernetes version
#               derived from its k8s.io/client-go, as a release build has)
#   kubeconform github.com/yannh/kubeconform/cmd/kubeconform@v0.8.0
#   First run: a few minutes (helm is a large build); later runs reuse the
#   binaries and take seconds. No Go and no cached helm is a FAILURE, never a
#   skip: without helm nothing about the chart is known.
#
# Kubernetes JSON schemas (no network but the package registries):
#   taken from the PyPI wheel kubernetes-validate==1.37.0 (sha256 pinned
#   below), which ships the "-local-strict" JSON schemas generated from the
#   OpenAPI of every Kubernetes minor 1.25 ... 1.37 — the same generator
#   (openapi2jsonschema) as kubeconform's usual schema repository. Only the
#   versions in K8S_VERSIONS are unpacked into .cache/k8s-schemas/; their
#   "$id" is dropped and "/api/_definitions.json#..." references are made
#   relative, so kubeconform resolves them from the local files. `pip
#   download --no-deps` fetches the wheel only; nothing is installed.
#   Rendered manifests are checked against the oldest supported version
#   (the chart's kubeVersion floor, 1.25) and the newest (1.37), strictly:
#   unknown fields and duplicate keys fail.
#
# Custom resources (ServiceMonitor, PrometheusRule, ScaledObject,
# TriggerAuthentication):
#   NOT skipped. Their schemas are committed in tests/helm/crd-schemas/,
#   converted (crd-schemas/generate.py, strict like the built-in kinds) from
#   the upstream CRDs: prometheus-operator v0.93.0 servicemonitors and
#   prometheusrules, KEDA v2.20.2 scaledobjects and triggerauthentications.
#
# Beyond kubeconform it checks: the defaults alone fail with the
# validateValues message (a database is required); validateValues and
# values.schema.json reject misconfigurations with clear messages; every
# Runledger container runs non-root, read-only, without privilege
# escalation or capabilities, under RuntimeDefault seccomp, with /tmp as an
# emptyDir; grace periods exceed RUNLEDGER_SHUTDOWN_GRACE_SECONDS; the
# default image is localhost/runledger:<project VERSION>, the name `make
# image` gives it (tests/image/lib.sh);
# the helm test pods run the chart's own image with its security context
# (`runledger version`, `runledger check`), nothing else;
# the dashboard ConfigMap, PrometheusRule, receiver, console and
# NetworkPolicy render as their values say (sidecar label, alerts scoped to the release's
# metrics Service, egress ports);
# the README's quick start block runs as written, with fake kubectl and
# helm (fakebin/) against a stub API server (stub_apiserver.py) so helm's
# lookups see the Secrets it created, and the install is refused, naming
# the Secret, without one; the migrate hook mounts those Secrets optional
# and names them in --require-secret;
# README.md documents every value; values.schema.json is current
# (gen_values_schema.py --check).
#
# Usage: check.sh [--tools-only]
#   --tools-only  build/fetch helm, kubeconform and the schemas into the
#                 cache and stop (a setup step can warm the cache before
#                 ctest, so the test's 900 s budget never pays the build)
#
# Environment:
#   RL_CACHE_DIR  cache root (default <repo>/.cache): bin/, downloads/,
#                 k8s-schemas/
#   GOMODCACHE, GOCACHE, GOPROXY  as the go command uses them
set -euo pipefail

# The newest helm 3 release approved for use here (v3.22.0 is served but
# not approved); helm 4, a major release, has not been run against the
# chart's quick start.
HELM_VERSION=v3.21.4
KUBECONFORM_VERSION=v0.8.0
KV_VERSION=1.37.0
KV_WHEEL=kubernetes_validate-${KV_VERSION}-py3-none-any.whl
KV_SHA256=85136d018a27b50ec7fc049d902bfa5193f5976807e6c0f408e3ab6fe078cad9
K8S_VERSIONS=(1.25.0 1.37.0)

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
here=$root/tests/helm
chart=$root/helm/runledger
cache=${RL_CACHE_DIR:-$root/.cache}
bin=$cache/bin
schemas=$cache/k8s-schemas/kubernetes-validate-$KV_VERSION
work=$(mktemp -d "${TMPDIR:-/tmp}/rl-helm-check.XXXXXX")
trap 'rm -rf "$work"' EXIT

# helm writes its caches and repository config under HOME otherwise.
export HELM_CACHE_HOME=$work/helm/cache HELM_CONFIG_HOME=$work/helm/config \
    HELM_DATA_HOME=$work/helm/data

passed=0
failed=0
log() { printf 'check.sh: %s\n' "$*" >&2; }
die() {
    log "FATAL: $*"
    echo "0 passed, 1 failed"
    exit 1
}
ok() {
    passed=$((passed + 1))
    printf 'ok   %s\n' "$1"
}
not_ok() {
    failed=$((failed + 1))
    printf 'FAIL %s\n' "$1"
    [ -z "${2:-}" ] || sed 's/^/     | /' "$2" | head -n 60
}

# ---- tools -----------------------------------------------------------------

go_install() { # <what> <package@version> [ldflags]
    command -v go >/dev/null 2>&1 ||
        die "no $1 in $bin and no Go toolchain to build it (install golang)"
    log "building $1 from the Go module proxy (first run only; minutes)"
    mkdir -p "$bin"
    # GOGC=400: the compiler collects garbage less often (about a sixth
    # less CPU for a build this size, for a little more memory).
    GOBIN=$bin GOFLAGS=-mod=mod CGO_ENABLED=0 GOGC=${GOGC:-400} \
        go install -trimpath -ldflags "${3:-}" "$2" ||
        die "could not build $1 ($2)"
}

ensure_helm() {
    local have="" gomod minor
    [ -x "$bin/helm" ] && have=$("$bin/helm" version --template '{{.Version}}' 2>/dev/null || true)
    [ "$have" = "$HELM_VERSION" ] && return 0
    command -v go >/dev/null 2>&1 ||
        die "no helm $HELM_VERSION in $bin and no Go toolchain to build it"
    # The default Kubernetes version of `helm template` and of lint's
    # deprecation checks comes from ldflags in helm's Makefile: the minor of
    # its k8s.io/client-go (v0.N.x -> 1.N). Without them helm assumes 1.20.
    gomod=$(GOFLAGS=-mod=mod go mod download -json "helm.sh/helm/v3@$HELM_VERSION" |
        sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",\{0,1\}$/\1/p')
    if [ -z "$gomod" ] || [ ! -f "$gomod" ]; then
        die "could not download helm.sh/helm/v3@$HELM_VERSION from the Go module proxy"
    fi
    minor=$(sed -n 's/^[[:space:]]*k8s.io\/client-go v0\.\([0-9]*\)\..*/\1/p' "$gomod" | head -n 1)
    [ -n "$minor" ] || die "no k8s.io/client-go in $gomod"
    go_install helm "helm.sh/helm/v3/cmd/helm@$HELM_VERSION" \
        "-w -s -X helm.sh/helm/v3/internal/version.version=$HELM_VERSION \
-X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMajor=1 \
-X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMinor=$minor \
-X helm.sh/helm/v3/pkg/chartutil.k8sVersionMajor=1 \
-X helm.sh/helm/v3/pkg/chartutil.k8sVersionMinor=$minor"
    have=$("$bin/helm" version --template '{{.Version}}')
    [ "$have" = "$HELM_VERSION" ] || die "built helm reports $have, not $HELM_VERSION"
}

ensure_kubeconform() {
    local have=""
    [ -x "$bin/kubeconform" ] && have=$("$bin/kubeconform" -v 2>/dev/null || true)
    [ "$have" = "$KUBECONFORM_VERSION" ] && return 0
    go_install kubeconform \
        "github.com/yannh/kubeconform/cmd/kubeconform@$KUBECONFORM_VERSION" \
        "-w -s -X main.version=$KUBECONFORM_VERSION"
}

ensure_schemas() {
    local v missing=() wheel=$cache/downloads/$KV_WHEEL
    for v in "${K8S_VERSIONS[@]}"; do
        [ -f "$schemas/v$v-local-strict/.complete" ] || missing+=("$v")
    done
    [ ${#missing[@]} -eq 0 ] && return 0
    command -v python3 >/dev/null 2>&1 || die "python3 is needed to unpack the schemas"
    if ! echo "$KV_SHA256  $wheel" | sha256sum -c --status 2>/dev/null; then
        log "downloading kubernetes-validate==$KV_VERSION (Kubernetes JSON schemas) from PyPI"
        mkdir -p "$cache/downloads"
        rm -f "$wheel"
        python3 -m pip download --quiet --no-deps --only-binary=:all: \
            --dest "$cache/downloads" "kubernetes-validate==$KV_VERSION" ||
            die "could not download kubernetes-validate==$KV_VERSION with pip"
        echo "$KV_SHA256  $wheel" | sha256sum -c --status ||
            die "$wheel does not have the pinned sha256 $KV_SHA256"
    fi
    python3 - "$wheel" "$schemas" "${missing[@]}" <<'EOF' || die "could not unpack the schemas"
import json, os, shutil, sys, zipfile

wheel, dest, versions = sys.argv[1], sys.argv[2], sys.argv[3:]
with zipfile.ZipFile(wheel) as zf:
    names = zf.namelist()
    for version in versions:
        sub = "v%s-local-strict" % version
        prefix = "kubernetes_validate/kubernetes-json-schema/%s/" % sub
        target = os.path.join(dest, sub)
        tmp = target + ".tmp"
        shutil.rmtree(tmp, ignore_errors=True)
        os.makedirs(tmp)
        count = 0
        for name in names:
            if not name.startswith(prefix) or not name.endswith(".json"):
                continue
            doc = json.loads(zf.read(name))
            # The wheel's validator resolves "/api/_definitions.json" against
            # the "$id" URL; kubeconform must find it next to the file.
            doc.pop("$id", None)
            text = json.dumps(doc).replace('"/api/_definitions.json#',
                                           '"_definitions.json#')
            with open(os.path.join(tmp, name[len(prefix):]), "w") as fp:
                fp.write(text)
            count += 1
        if count < 100:
            sys.exit("only %d schemas for %s in %s" % (count, version, wheel))
        open(os.path.join(tmp, ".complete"), "w").write("%d\n" % count)
        shutil.rmtree(target, ignore_errors=True)
        os.rename(tmp, target)
        print("check.sh: unpacked %d schemas of Kubernetes %s" % (count, version),
              file=sys.stderr)
EOF
}

start=$(date +%s)
ensure_helm
ensure_kubeconform
ensure_schemas
helm=$bin/helm
kubeconform=$bin/kubeconform
log "tools ready after $(($(date +%s) - start))s: helm $HELM_VERSION, kubeconform $KUBECONFORM_VERSION, schemas of Kubernetes ${K8S_VERSIONS[*]}"
if [ "${1:-}" = --tools-only ]; then
    exit 0
fi

# ---- checks ----------------------------------------------------------------

# Renders <name> with the given helm arguments into $work/<name>.yaml.
render() { # <name> <kube-version> [helm args...]
    local name=$1 kv=$2
    shift 2
    "$helm" template rl "$chart" --namespace runledger --kube-version "$kv" \
        "$@" >"$work/$name.yaml" 2>"$work/$name.err"
}

lint_case() { # <name> [helm args...]
    local name=$1
    shift
    if "$helm" lint "$chart" --strict "$@" >"$work/lint-$name.out" 2>&1; then
        ok "helm lint --strict ($name)"
    else
        not_ok "helm lint --strict ($name)" "$work/lint-$name.out"
    fi
}

# Renders a case for every Kubernetes version; kubeconform runs once per
# version over all cases afterwards (it compiles each kind's schema, with
# the 1.4 MB definitions file, once per run).
declare -A rendered=()
validate_case() { # <name> [helm args...]
    local name=$1 kv out
    shift
    for kv in "${K8S_VERSIONS[@]}"; do
        out=$name-$kv
        if ! render "$out" "$kv" "$@"; then
            not_ok "helm template ($name, Kubernetes $kv)" "$work/$out.err"
            continue
        fi
        ok "helm template ($name, Kubernetes $kv)"
        rendered[$kv]="${rendered[$kv]:-} $work/$out.yaml"
    done
}

kubeconform_all() {
    local kv files
    for kv in "${K8S_VERSIONS[@]}"; do
        files=${rendered[$kv]:-}
        if [ -z "$files" ]; then
            echo "nothing rendered" >"$work/kc-$kv.out"
            not_ok "kubeconform (Kubernetes $kv)" "$work/kc-$kv.out"
            continue
        fi
        # shellcheck disable=SC2086 # the file list is split on purpose
        if "$kubeconform" -strict -summary -n 4 \
            -kubernetes-version "$kv" \
            -schema-location "$schemas/{{ .NormalizedKubernetesVersion }}-local-strict/{{ .ResourceKind }}{{ .KindSuffix }}.json" \
            -schema-location "$here/crd-schemas/{{ .Group }}/{{ .ResourceKind }}_{{ .ResourceAPIVersion }}.json" \
            $files >"$work/kc-$kv.out" 2>&1; then
            ok "kubeconform -strict, Kubernetes $kv + CRDs ($(for f in $files; do basename "$f" "-$kv.yaml"; done | paste -sd, -)): $(tail -n 1 "$work/kc-$kv.out")"
        else
            not_ok "kubeconform -strict, Kubernetes $kv + CRDs" "$work/kc-$kv.out"
        fi
    done
}

# A render that must fail, with a message containing <text>.
reject_case() { # <title> <text> [helm args...]
    local title=$1 text=$2 name
    shift 2
    name=reject-$((passed + failed))
    if render "$name" "${K8S_VERSIONS[-1]}" "$@"; then
        echo "rendered, but should have failed with: $text" >"$work/$name.err"
        not_ok "rejects $title" "$work/$name.err"
    elif grep -qF -- "$text" "$work/$name.err"; then
        ok "rejects $title"
    else
        not_ok "rejects $title (message lacks \"$text\")" "$work/$name.err"
    fi
}

# The image `make image` builds, by the name tests/image/lib.sh gives it
# (localhost/runledger:<project VERSION>), the defaults of its environment.
made_image=$(env -u RL_IMAGE_REGISTRY -u RL_IMAGE_NAME -u RL_IMAGE_TAG \
    bash -c '. "$1/tests/image/lib.sh" && echo "$rl_image"' _ "$root") ||
    die "could not read the image name from tests/image/lib.sh"

# Pod-level rules on a rendered file (PyYAML; present on these machines).
policy_case() { # <name> <file> [default: the image must be the default one]
    if python3 - "$2" "$made_image" "${3:-}" >"$work/policy-$1.out" 2>&1 <<'EOF'; then
import sys
import yaml

path, made_image, default_image = sys.argv[1], sys.argv[2], sys.argv[3] == "default"
docs = [d for d in yaml.safe_load_all(open(path)) if d]
problems = []
config = next(d for d in docs if d["kind"] == "ConfigMap"
              and d["metadata"]["name"].endswith("-config"))
grace = int(config["data"]["RUNLEDGER_SHUTDOWN_GRACE_SECONDS"])

def pod_spec(doc):
    kind = doc["kind"]
    if kind == "Pod":
        return doc["spec"]
    if kind in ("Deployment", "Job"):
        return doc["spec"]["template"]["spec"]
    if kind == "CronJob":
        return doc["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    return None

pods = 0
for doc in docs:
    spec = pod_spec(doc)
    if spec is None:
        continue
    where = "%s/%s" % (doc["kind"], doc["metadata"]["name"])
    psc = spec.get("securityContext", {})
    if psc.get("seccompProfile", {}).get("type") != "RuntimeDefault":
        problems.append(where + ": pod seccompProfile is not RuntimeDefault")
    if spec.get("automountServiceAccountToken") is not False:
        problems.append(where + ": mounts a service account token")
    for c in spec["containers"]:
        cw = "%s container %s" % (where, c["name"])
        sc = c.get("securityContext", {})
        if not (sc.get("runAsNonRoot") or psc.get("runAsNonRoot")):
            problems.append(cw + ": runAsNonRoot is not set")
        if sc.get("readOnlyRootFilesystem") is not True:
            problems.append(cw + ": root filesystem is writable")
        if sc.get("allowPrivilegeEscalation") is not False:
            problems.append(cw + ": allowPrivilegeEscalation is not false")
        if sc.get("capabilities", {}).get("drop") != ["ALL"]:
            problems.append(cw + ": capabilities are not dropped")
        image = c["image"]
        if not image.rsplit("/", 1)[-1].startswith("runledger"):
            # A cluster without internet access pulls nothing else.
            problems.append("%s: image %s is not Runledger's" % (cw, image))
            continue
        pods += 1
        uid = sc.get("runAsUser", psc.get("runAsUser"))
        if uid != 10001:
            problems.append(cw + ": runAsUser is %r, not 10001" % uid)
        if "/tmp" not in [m["mountPath"] for m in c.get("volumeMounts", [])]:
            if doc["kind"] != "Pod":
                problems.append(cw + ": no emptyDir at /tmp")
        # The reference receiver serves no HTTP port: no probes to check.
        serves_http = any(p.get("name") == "http-metrics" for p in c.get("ports", []))
        if doc["kind"] == "Deployment" and serves_http:
            tg = spec.get("terminationGracePeriodSeconds", 30)
            # The process's watchdog ends it at the grace + 10 s.
            if tg <= grace + 10:
                problems.append("%s: terminationGracePeriodSeconds %d <= "
                                "RUNLEDGER_SHUTDOWN_GRACE_SECONDS %d + 10" % (where, tg, grace))
            names = {p["name"] for p in c.get("ports", [])}
            for probe, url in (("livenessProbe", "/healthz"), ("readinessProbe", "/readyz")):
                got = c.get(probe, {}).get("httpGet", {})
                if got.get("path") != url or got.get("port") not in names:
                    problems.append("%s: %s is not GET %s on the metrics port" % (cw, probe, url))
        if default_image and image != made_image:
            problems.append("%s: default image %s is not %s, the one make image builds"
                            % (cw, image, made_image))
if pods == 0:
    problems.append("no Runledger container found")
for p in problems:
    print(p)
print("%d Runledger containers checked" % pods)
sys.exit(1 if problems else 0)
EOF
        ok "pod security and lifecycle rules ($1): $(tail -n 1 "$work/policy-$1.out")"
    else
        not_ok "pod security and lifecycle rules ($1)" "$work/policy-$1.out"
    fi
}

# The bare defaults: `helm lint` passes (its lint mode reports a template's
# `fail` as [INFO] so charts with required values can be linted) and shows
# the validateValues message; `helm template`/install refuse to render.
if "$helm" lint "$chart" --strict >"$work/lint-bare.out" 2>&1 &&
    grep -qF "No PostgreSQL connection is configured" "$work/lint-bare.out"; then
    ok "helm lint --strict (bare defaults), reporting the missing database"
else
    not_ok "helm lint --strict (bare defaults), reporting the missing database" "$work/lint-bare.out"
fi
reject_case "the bare defaults (no database)" "No PostgreSQL connection is configured"

lint_case default -f "$chart/ci/default-values.yaml"
validate_case default -f "$chart/ci/default-values.yaml"
policy_case default "$work/default-${K8S_VERSIONS[-1]}.yaml" default

lint_case all-on -f "$chart/ci/all-on-values.yaml"
validate_case all-on -f "$chart/ci/all-on-values.yaml"
policy_case all-on "$work/all-on-${K8S_VERSIONS[-1]}.yaml"

# The dashboard and the alerts on the defaults (ambiguousPolicy retry_once
# renders the extra-generations alert, which all-on's dedupe leaves out),
# the receiver without TLS or SASL, and the NetworkPolicy with its open
# defaults (any destination on the service ports).
validate_case monitoring -f "$chart/ci/default-values.yaml" \
    --set metrics.grafanaDashboard.enabled=true \
    --set metrics.prometheusRule.enabled=true --set receiver.enabled=true \
    --set networkPolicy.enabled=true
policy_case monitoring "$work/monitoring-${K8S_VERSIONS[-1]}.yaml" default

# The rendered objects say what the values asked for.
monitoring_case() {
    local last=${K8S_VERSIONS[-1]}
    if python3 - "$work/monitoring-$last.yaml" "$work/all-on-$last.yaml" \
        "$chart/dashboards/runledger.json" >"$work/monitoring.out" 2>&1 <<'EOF'; then
import json, sys
import yaml

problems = []
mon = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d]
allon = [d for d in yaml.safe_load_all(open(sys.argv[2])) if d]
shipped = json.load(open(sys.argv[3]))


def one(docs, kind, suffix=""):
    found = [d for d in docs if d["kind"] == kind
             and d["metadata"]["name"].endswith(suffix)]
    if len(found) != 1:
        problems.append("%d %s%s objects, not 1" % (len(found), kind, suffix))
        return None
    return found[0]


for docs, ns in ((mon, "runledger"), (allon, "monitoring")):
    cm = one(docs, "ConfigMap", "-dashboard")
    if cm:
        if cm["metadata"]["labels"].get("grafana_dashboard") != "1":
            problems.append('dashboard ConfigMap lacks grafana_dashboard: "1"')
        if cm["metadata"]["namespace"] != ns:
            problems.append("dashboard ConfigMap in %s, not %s"
                            % (cm["metadata"]["namespace"], ns))
        if json.loads(cm["data"]["runledger.json"]) != shipped:
            problems.append("dashboard ConfigMap differs from dashboards/runledger.json")
    rule = one(docs, "PrometheusRule")
    if rule:
        rules = [r for g in rule["spec"]["groups"] for r in g["rules"]]
        want = {"RunledgerUnknownRuns", "RunledgerRunsAwaitingApproval",
                "RunledgerNotReady", "RunledgerAbsent",
                "RunledgerConsumerLagGrowing", "RunledgerOutboxDeliveryDelayed",
                "RunledgerOutboxBacklogGrowing", "RunledgerOutboxRelayStalled",
                "RunledgerDeadLetters", "RunledgerRunsFailing",
                "RunledgerScheduleWindowsMissed"}
        extra = "RunledgerAmbiguousAttempts" if docs is mon else "RunledgerRebalancing"
        got = {r.get("alert") for r in rules}
        if got != want | {extra}:
            problems.append("alerts %s, wanted %s" % (sorted(got), sorted(want | {extra})))
        for r in rules:
            if (r.get("alert") in want | {"RunledgerAmbiguousAttempts"}
                    and 'service="rl-runledger-metrics"' not in r["expr"]):
                problems.append(r["alert"] + ": expr not scoped to the release's metrics Service")
dep = one(mon, "Deployment", "-receiver")
if dep:
    c = dep["spec"]["template"]["spec"]["containers"][0]
    if c["args"] != ["receive"]:
        problems.append("receiver args %r" % c["args"])
    if "runledger.io/metrics" in dep["spec"]["template"]["metadata"]["labels"]:
        problems.append("receiver pods selected by the metrics Service (they serve no port)")
policy = one(mon, "NetworkPolicy")
if policy:
    ports = sorted((p["protocol"], p["port"]) for e in policy["spec"]["egress"]
                   for p in e["ports"])
    want = sorted([("UDP", 53), ("TCP", 53), ("TCP", 5432), ("TCP", 9092),
                   ("TCP", 9093), ("TCP", 443), ("TCP", 9464)])
    if ports != want:
        problems.append("egress ports %r, wanted %r" % (ports, want))
    if [p["port"] for i in policy["spec"]["ingress"] for p in i["ports"]] != ["http-metrics"]:
        problems.append("ingress is not only the metrics port")
# The console (all-on): its own Deployment, Service, Ingress and policy;
# the release's policy leaves its pods to that one.
dep = one(allon, "Deployment", "-console")
if dep:
    c = dep["spec"]["template"]["spec"]["containers"][0]
    env = {e["name"]: e.get("value") for e in c["env"]}
    if c["args"] != ["console"]:
        problems.append("console args %r" % c["args"])
    if (env.get("RUNLEDGER_CONSOLE_LISTEN") != "0.0.0.0:8090"
            or env.get("RUNLEDGER_CONSOLE_TRUSTED_USER_HEADER") != "X-Forwarded-User"
            or env.get("RUNLEDGER_CONSOLE_TRUSTED_PROXY") != "10.0.0.0/8"):
        problems.append("console env %r" % env)
    for probe in ("livenessProbe", "readinessProbe"):
        if c.get(probe, {}).get("httpGet") != {"path": "/healthz",
                                               "port": "http-console"}:
            problems.append("console %s %r" % (probe, c.get(probe)))
cm = one(allon, "ConfigMap", "-config")
if cm and cm["data"].get("RUNLEDGER_CONSOLE_BASE_URL") != "https://runledger.example.com":
    problems.append("RUNLEDGER_CONSOLE_BASE_URL not in the settings")
ing = one(allon, "Ingress", "-console")
if ing:
    backend = ing["spec"]["rules"][0]["http"]["paths"][0]["backend"]["service"]
    if backend != {"name": "rl-runledger-console", "port": {"name": "http-console"}}:
        problems.append("console Ingress backend %r" % backend)
cpol = one(allon, "NetworkPolicy", "-console")
if cpol:
    ports = sorted((p["protocol"], p["port"]) for e in cpol["spec"]["egress"]
                   for p in e["ports"])
    if ports != sorted([("UDP", 53), ("TCP", 53), ("TCP", 5432), ("TCP", 9093)]):
        problems.append("console egress ports %r (DNS, PostgreSQL and Kafka only)" % ports)
    if [p["port"] for i in cpol["spec"]["ingress"] for p in i["ports"]] != ["http-console"]:
        problems.append("console ingress is not only its port")
main = [d for d in allon if d["kind"] == "NetworkPolicy"
        and not d["metadata"]["name"].endswith("-console")]
if main and {"key": "app.kubernetes.io/component", "operator": "NotIn",
             "values": ["console"]} not in main[0]["spec"]["podSelector"].get(
                 "matchExpressions", []):
    problems.append("the release's NetworkPolicy also selects the console pods")
# With metricsFrom set (all-on), the helm test pods still reach the
# metrics port: `helm test` fetches /readyz and /metrics through it.
if main:
    peers = [p for i in main[0]["spec"]["ingress"] for p in i.get("from", [])]
    if not any(p.get("podSelector", {}).get("matchLabels", {}).get(
            "app.kubernetes.io/component") == "test" for p in peers):
        problems.append("the metrics port does not admit the helm test pods when metricsFrom is set")
for p in problems:
    print(p)
print("dashboard ConfigMap, alerts, receiver, console and NetworkPolicy as configured")
sys.exit(1 if problems else 0)
EOF
        ok "monitoring objects: $(tail -n 1 "$work/monitoring.out")"
    else
        not_ok "monitoring objects" "$work/monitoring.out"
    fi
}

# The helm test pods run the chart's own image (no busybox: a cluster
# without internet access cannot pull it) with the chart's security
# context: `runledger version`, and `runledger check` of /readyz and of
# runledger_ready 1 on /metrics through the metrics Service, the metrics
# token (when /metrics needs one) given to the /metrics check only.
validate_case helm-tests-token -f "$chart/ci/default-values.yaml" \
    --set metrics.token.existingSecret=rl-metrics-token
helm_tests_case() {
    local last=${K8S_VERSIONS[-1]}
    if python3 - "$work/default-$last.yaml" "$work/helm-tests-token-$last.yaml" \
        "$chart/values.yaml" >"$work/helm-tests.out" 2>&1 <<'EOF'; then
import sys
import yaml

problems = []
values = yaml.safe_load(open(sys.argv[3]))
base = "http://rl-runledger-metrics.runledger.svc:9464"
want_args = {
    "rl-runledger-test-version": ["version"],
    "rl-runledger-test-readyz": ["check", "--url", base + "/readyz",
                                 "--timeout", "10"],
    "rl-runledger-test-metrics": ["check", "--url", base + "/metrics",
                                  "--expect-line", "runledger_ready 1",
                                  "--timeout", "10"],
}
token_args = ["--bearer-file", "/etc/runledger/metrics-token/token"]
for path, token in ((sys.argv[1], False), (sys.argv[2], True)):
    docs = [d for d in yaml.safe_load_all(open(path)) if d]
    consumer = next(d for d in docs if d["kind"] == "Deployment"
                    and d["metadata"]["name"].endswith("-consumer"))
    image = consumer["spec"]["template"]["spec"]["containers"][0]["image"]
    tests = {d["metadata"]["name"]: d for d in docs if d["kind"] == "Pod"
             and d["metadata"].get("annotations", {}).get("helm.sh/hook") == "test"}
    if sorted(tests) != sorted(want_args):
        problems.append("test pods %s, wanted %s" % (sorted(tests), sorted(want_args)))
    for name, pod in tests.items():
        spec = pod["spec"]
        if spec.get("securityContext") != values["podSecurityContext"]:
            problems.append("%s: pod securityContext is not podSecurityContext" % name)
        if len(spec["containers"]) != 1:
            problems.append("%s: %d containers, not 1 (helm test --logs)"
                            % (name, len(spec["containers"])))
        policy = pod["metadata"]["annotations"].get("helm.sh/hook-delete-policy", "")
        if "hook-succeeded" in policy:
            problems.append("%s: deleted once it succeeds, so helm test --logs "
                            "(the quick start) finds no pod" % name)
        c = spec["containers"][0]
        if c["image"] != image:
            problems.append("%s: image %s, not the chart's %s" % (name, c["image"], image))
        if "command" in c:
            problems.append("%s: has a command (the image has no shell)" % name)
        if c.get("securityContext") != values["containerSecurityContext"]:
            problems.append("%s: container securityContext is not containerSecurityContext" % name)
        want = list(want_args.get(name, []))
        if token and name.endswith("-metrics"):
            want += token_args
            vols = spec.get("volumes", [])
            if [v.get("secret", {}).get("secretName") for v in vols] != ["rl-metrics-token"]:
                problems.append("%s: metrics token volume %r" % (name, vols))
        elif spec.get("volumes"):
            problems.append("%s: volumes %r (nothing to mount)" % (name, spec["volumes"]))
        if c.get("args") != want:
            problems.append("%s%s: args %r, wanted %r"
                            % (name, " (token)" if token else "", c.get("args"), want))
for p in problems:
    print(p)
print("helm test pods: the chart's image, runledger version and runledger check")
sys.exit(1 if problems else 0)
EOF
        ok "$(tail -n 1 "$work/helm-tests.out")"
    else
        not_ok "helm test pods" "$work/helm-tests.out"
    fi
}

# Inline secrets and the other halves of the existingSecret choices.
validate_case inline-secrets -f "$chart/ci/default-values.yaml" \
    --set database.existingSecret= --set database.url=postgresql://rl@db/rl \
    --set model.apiKey=k --set kafka.securityProtocol=SASL_SSL \
    --set kafka.sasl.enabled=true --set kafka.sasl.username=rl \
    --set kafka.sasl.password=p --set kafka.tls.caCert=PEM \
    --set keda.enabled=true --set relay.enabled=true \
    --set consumer.relayInProcess=false

# ---- the README's quick start and the Secrets it names ---------------------
# The block between <!-- quickstart:begin --> and <!-- quickstart:end --> of
# the chart's README runs as it is (sh -eu, from the repository's root,
# with its placeholder values), kubectl and helm replaced by
# tests/helm/fakebin: kubectl adds the namespace and the Secrets to the
# object list of a stub API server (stub_apiserver.py), and helm install
# renders with --dry-run=server against it, so the chart's lookups see
# what the quick start created. It must create every Secret it names and
# install with --wait; the same block without the model Secret must fail
# naming it; a Secret without the key the values name must fail naming
# the key. The render is validated with the others.
stub_pid=
trap 'rm -rf "$work"; [ -z "$stub_pid" ] || kill "$stub_pid" 2>/dev/null' EXIT
echo '[]' >"$work/cluster.json"
coproc STUB { exec python3 "$here/stub_apiserver.py" "$work/cluster.json" 2>"$work/stub.log"; }
stub_pid=$STUB_PID
read -r -t 30 stub_port <&"${STUB[0]}" || die "the stub API server did not start: $(cat "$work/stub.log")"
cat >"$work/kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters: [{name: stub, cluster: {server: "http://127.0.0.1:$stub_port"}}]
users: [{name: stub, user: {}}]
contexts: [{name: stub, context: {cluster: stub, user: stub}}]
current-context: stub
EOF
awk '/<!-- quickstart:begin -->/{on=1; next} /<!-- quickstart:end -->/{on=0} on' \
    "$chart/README.md" >"$work/quickstart.md"
# One ```sh block and nothing else between the markers.
if [ "$(head -n 1 "$work/quickstart.md")" = '```sh' ] &&
    [ "$(tail -n 1 "$work/quickstart.md")" = '```' ] &&
    [ "$(grep -c '^```' "$work/quickstart.md")" -eq 2 ]; then
    sed '1d;$d' "$work/quickstart.md" >"$work/quickstart.sh"
    ok "README quick start: one sh block between the quickstart markers"
else
    not_ok "README quick start: one sh block between the quickstart markers" "$work/quickstart.md"
    printf 'false\n' >"$work/quickstart.sh"
fi

# Runs a quick start script against an empty stub cluster; its output in
# $work/<name>.out, the render in $work/<name>.yaml.
run_quickstart() { # <name> <script>
    echo '[]' >"$work/cluster.json"
    : >"$work/$1.calls"
    (cd "$root" && env -u DATABASE_URL -u KAFKA_BOOTSTRAP_SERVERS \
        -u MODEL_BASE_URL -u MODEL_API_KEY -u IMAGE_REGISTRY \
        PATH="$here/fakebin:$PATH" KUBECONFIG="$work/kubeconfig" \
        RL_FAKE_CLUSTER="$work/cluster.json" RL_FAKE_LOG="$work/$1.calls" \
        RL_FAKE_RENDER="$work/$1.yaml" RL_REAL_HELM="$helm" \
        RL_FAKE_KUBE_VERSION="${K8S_VERSIONS[-1]}" \
        sh -eu "$2") >"$work/$1.out" 2>&1
}

if run_quickstart quickstart "$work/quickstart.sh" &&
    grep -q '^helm install .* --wait' "$work/quickstart.calls" &&
    grep -q '^helm test ' "$work/quickstart.calls"; then
    ok "README quick start runs as written: creates the Secrets it names, helm install --wait, helm test"
    rendered[${K8S_VERSIONS[-1]}]="${rendered[${K8S_VERSIONS[-1]}]:-} $work/quickstart.yaml"
    policy_case quickstart "$work/quickstart.yaml" default
else
    cat "$work/quickstart.calls" >>"$work/quickstart.out"
    not_ok "README quick start runs as written: creates the Secrets it names, helm install --wait, helm test" "$work/quickstart.out"
fi

# Without the command that creates the model Secret: helm install refuses.
awk '/create secret generic runledger-model/{skip=1} skip && !/\\$/{skip=0; next} !skip' \
    "$work/quickstart.sh" >"$work/quickstart-nomodel.sh"
if grep -q runledger-model "$work/quickstart-nomodel.sh" &&
    ! grep -q 'create secret generic runledger-model' "$work/quickstart-nomodel.sh" &&
    ! run_quickstart quickstart-nomodel "$work/quickstart-nomodel.sh" &&
    grep -qF 'Secret "runledger-model" (named by model.existingSecret) does not exist in namespace' \
        "$work/quickstart-nomodel.out" &&
    ! grep -qF 'Secret "runledger-database"' "$work/quickstart-nomodel.out"; then
    ok "helm install refuses a Secret the values name that the cluster lacks, naming it"
else
    not_ok "helm install refuses a Secret the values name that the cluster lacks, naming it" "$work/quickstart-nomodel.out"
fi

# The model Secret with another key than model.existingSecretKey.
sed 's/--from-literal=api-key=/--from-literal=token=/' "$work/quickstart.sh" >"$work/quickstart-key.sh"
if ! run_quickstart quickstart-key "$work/quickstart-key.sh" &&
    grep -qF 'Secret "runledger-model" in namespace "runledger" has no key "api-key"' \
        "$work/quickstart-key.out"; then
    ok "helm install refuses a Secret without the key the values name, naming it"
else
    not_ok "helm install refuses a Secret without the key the values name, naming it" "$work/quickstart-key.out"
fi

# The migrate hook (quick start, all-on): it mounts every Secret the
# values name optional (a missing one cannot hold the pod), checks each with
# --require-secret where the pod has it, waits migration.waitSeconds for a
# connection that may heal, and its Job fails at once on exit 4.
migrate_hook_case() {
    local last=${K8S_VERSIONS[-1]}
    if python3 - "$work/quickstart.yaml" "$work/all-on-$last.yaml" \
        >"$work/migrate-hook.out" 2>&1 <<'EOF'; then
import sys
import yaml

problems = []
want_required = {
    sys.argv[1]: {"runledger-database/database-url", "runledger-model/api-key"},
    # all-on: the URL is inline (the hook's own Secret); the CA of
    # PostgreSQL and of Kafka, the SASL user and the metrics token are not.
    sys.argv[2]: {"postgresql-ca/ca.crt", "runledger-kafka-user/password",
                  "runledger-kafka-user/username", "kafka-cluster-ca/ca.crt",
                  "runledger-metrics-token/token"},
}
for path, want in want_required.items():
    name = path.rsplit("/", 1)[-1]
    docs = [d for d in yaml.safe_load_all(open(path)) if d]
    job = next(d for d in docs if d["kind"] == "Job"
               and d["metadata"]["name"].endswith("-migrate"))
    spec = job["spec"]["template"]["spec"]
    c = spec["containers"][0]
    args = c["args"]
    if args[:3] != ["migrate", "--wait", "120"]:
        problems.append("%s: args start %r" % (name, args[:3]))
    if c.get("terminationMessagePolicy") != "FallbackToLogsOnError":
        problems.append("%s: no FallbackToLogsOnError" % name)
    rules = job["spec"].get("podFailurePolicy", {}).get("rules", [])
    if not any(r["action"] == "FailJob" and 4 in r["onExitCodes"]["values"]
               for r in rules if "onExitCodes" in r):
        problems.append("%s: exit 4 does not fail the Job at once" % name)
    # Where each file of a Secret appears in the container.
    mounts = {m["name"]: m["mountPath"] for m in c.get("volumeMounts", [])}
    files = {}
    for v in spec.get("volumes", []):
        sources = ([{"secret": dict(v["secret"], name=v["secret"]["secretName"])}]
                   if "secret" in v else v.get("projected", {}).get("sources", []))
        for s in sources:
            sec = s.get("secret")
            if not sec:
                continue
            if sec.get("optional") is not True:
                problems.append("%s: volume %s mounts Secret %s, not optional"
                                % (name, v["name"], sec["name"]))
            for item in sec.get("items", []):
                if v["name"] in mounts:
                    files[mounts[v["name"]] + "/" + item["path"]] = "%s/%s" % (sec["name"], item["key"])
    envs = {}
    for e in c.get("env", []):
        ref = e.get("valueFrom", {}).get("secretKeyRef")
        if ref:
            envs[e["name"]] = "%s/%s" % (ref["name"], ref["key"])
            if ref["name"].endswith("-migrate"):
                continue  # the hook's own Secret, made before the Job
            if ref.get("optional") is not True:
                problems.append("%s: env %s from Secret %s, not optional"
                                % (name, e["name"], ref["name"]))
    required = set()
    for i, a in enumerate(args):
        if a != "--require-secret":
            continue
        spec_, where = args[i + 1].split("=", 1)
        required.add(spec_)
        kind, target = where.split(":", 1)
        got = envs.get(target) if kind == "env" else files.get(target)
        if got != spec_:
            problems.append("%s: --require-secret %s: %s %s holds %r"
                            % (name, args[i + 1], kind, target, got))
    if required != want:
        problems.append("%s: requires %s, wanted %s" % (name, sorted(required), sorted(want)))
for p in problems:
    print(p)
print("migrate hook: Secrets mounted optional and required by name, --wait, exit 4 fails the Job")
sys.exit(1 if problems else 0)
EOF
        ok "$(tail -n 1 "$work/migrate-hook.out")"
    else
        not_ok "migrate hook checks the Secrets" "$work/migrate-hook.out"
    fi
}
# A Secret per database role: each pod's DATABASE_URL comes from its
# role's Secret; without them, from the one URL.
validate_case roles -f "$chart/ci/default-values.yaml" \
    --set database.existingSecret= --set database.owner.existingSecret=rl-owner \
    --set database.worker.existingSecret=rl-worker \
    --set database.relay.existingSecret=rl-relay \
    --set database.console.existingSecret=rl-console \
    --set database.console.existingSecretKey=uri \
    --set relay.enabled=true --set consumer.relayInProcess=false \
    --set console.enabled=true --set receiver.enabled=true \
    --set purge.enabled=true
roles_case() { # <file> <expected: name=secret/key,...>
    if python3 - "$1" "$2" >"$work/roles.out" 2>&1 <<'EOF'; then
import sys
import yaml

path, expected = sys.argv[1], dict(
    kv.split("=") for kv in sys.argv[2].split(","))
seen = {}
for d in yaml.safe_load_all(open(path)):
    if not d or d["kind"] not in ("Deployment", "Job", "CronJob"):
        continue
    spec = d["spec"]
    if d["kind"] == "CronJob":
        spec = spec["jobTemplate"]["spec"]
    for c in spec["template"]["spec"]["containers"]:
        for e in c.get("env", []):
            if e["name"] == "DATABASE_URL":
                ref = e["valueFrom"]["secretKeyRef"]
                name = d["metadata"]["name"].replace("rl-runledger-", "")
                seen[name] = "%s/%s" % (ref["name"], ref["key"])
problems = ["%s: %s, expected %s" % (k, seen.get(k), v)
            for k, v in expected.items() if seen.get(k) != v]
print("\n".join(problems) or "DATABASE_URL per role: %s" % seen)
sys.exit(1 if problems else 0)
EOF
        ok "$(tail -n 1 "$work/roles.out")"
    else
        not_ok "DATABASE_URL per role" "$work/roles.out"
    fi
}
roles_case "$work/roles-${K8S_VERSIONS[-1]}.yaml" \
    "migrate=rl-owner/database-url,purge=rl-owner/database-url,consumer=rl-worker/database-url,receiver=rl-worker/database-url,relay=rl-relay/database-url,console=rl-console/uri"
roles_case "$work/inline-secrets-${K8S_VERSIONS[-1]}.yaml" \
    "migrate=rl-runledger-migrate/database-url,consumer=rl-runledger-secrets/database-url,relay=rl-runledger-secrets/database-url"

kubeconform_all
monitoring_case
helm_tests_case
migrate_hook_case

base=(-f "$chart/ci/default-values.yaml")
reject_case "a relay Deployment next to in-process relays" \
    "set consumer.relayInProcess=false" "${base[@]}" --set relay.enabled=true
reject_case "a grace period the pod would not get" \
    "must exceed config.shutdownGraceSeconds" "${base[@]}" \
    --set consumer.terminationGracePeriodSeconds=20
reject_case "SASL without a SASL security protocol" \
    "needs kafka.securityProtocol SASL_SSL" "${base[@]}" \
    --set kafka.sasl.enabled=true --set kafka.sasl.password=p \
    --set kafka.sasl.username=u
reject_case "SASL without a password" "needs kafka.sasl.password" \
    "${base[@]}" --set kafka.sasl.enabled=true \
    --set kafka.securityProtocol=SASL_SSL --set kafka.sasl.username=u
reject_case "a Kafka CA without TLS" "set it to SSL or SASL_SSL" \
    "${base[@]}" --set kafka.tls.caCert=PEM
reject_case "the health port turned off" "config.httpPort=0" \
    "${base[@]}" --set config.httpPort=0
reject_case "a backoff cap below its base" "config.backoffMaxMs=10" \
    "${base[@]}" --set config.backoffMaxMs=10
reject_case "a KEDA minimum above the partitions" "keda.minReplicaCount=7" \
    "${base[@]}" --set keda.enabled=true --set keda.minReplicaCount=7
bad_request='schedules=[{"name":"a","cron":"* * * * *","job":"j","tenant":"t","version":"v1","window":"P1D","request":"x"}]'
reject_case "a schedule whose request is not an object (schema)" \
    "/schedules/0/request" "${base[@]}" --set-json "$bad_request"
reject_case "a schedule whose request is not an object (validateValues)" \
    "\"request\" must be an object" "${base[@]}" --set-json "$bad_request" \
    --skip-schema-validation
reject_case "a schedule without a window (schema)" "window" "${base[@]}" \
    --set-json 'schedules=[{"name":"a","cron":"* * * * *","job":"j","tenant":"t","version":"v1","request":{"model":"m"}}]'
reject_case "a misspelt value (schema)" "replicas" "${base[@]}" \
    --set consumer.replicas=3
reject_case "an unknown ambiguous policy (schema)" "ambiguousPolicy" \
    "${base[@]}" --set config.ambiguousPolicy=sometimes
reject_case "stored completions with dedupe (validateValues)" \
    "config.storedCompletions=true" "${base[@]}" \
    --set config.storedCompletions=true --set config.ambiguousPolicy=dedupe
reject_case "an unknown model API (schema)" "modelApi" "${base[@]}" \
    --set config.modelApi=batch
reject_case "an alert duration Prometheus cannot read (schema)" \
    "/metrics/prometheusRule/alerts/unknownRuns/for" "${base[@]}" \
    --set metrics.prometheusRule.alerts.unknownRuns.for=soon
reject_case "a failure ratio above 1 (schema)" "ratio" "${base[@]}" \
    --set metrics.prometheusRule.alerts.runsFailing.ratio=1.5
reject_case "console proxy mode without a NetworkPolicy source" \
    "console.networkPolicy.from" "${base[@]}" --set console.enabled=true \
    --set console.trustedUserHeader=X-Forwarded-User \
    --set-json 'console.trustedProxies=["10.0.0.0/8"]'
reject_case "console proxy mode with NetworkPolicies off" \
    "networkPolicy.enabled=true" -f "$chart/ci/all-on-values.yaml" \
    --set networkPolicy.enabled=false
reject_case "a NetworkPolicy port out of range (schema)" \
    "/networkPolicy/kafka/ports/0" "${base[@]}" \
    --set-json 'networkPolicy.kafka.ports=[70000]'

# NOTES.txt warns when consumers outnumber partitions. `helm install
# --dry-run` needs a cluster, so a copy of the chart renders the notes (the
# named template NOTES.txt includes) as YAML comments.
notes_case() { # <title> <text> [helm args...]
    local title=$1 text=$2
    shift 2
    if [ ! -d "$work/notes-chart" ]; then
        mkdir -p "$work/notes-chart"
        cp -R "$chart" "$work/notes-chart/runledger"
        printf '%s\n' '{{ include "runledger.notes" . | trim | replace "\n" "\n# " | printf "# %s" }}' \
            >"$work/notes-chart/runledger/templates/notes-probe.yaml"
    fi
    if "$helm" template rl "$work/notes-chart/runledger" --namespace runledger \
        --show-only templates/notes-probe.yaml "$@" >"$work/notes.out" 2>&1 &&
        grep -qF -- "$text" "$work/notes.out"; then
        ok "NOTES $title"
    else
        not_ok "NOTES $title" "$work/notes.out"
    fi
}
notes_case "warn about consumers beyond the partition count" \
    "consumer.replicaCount=8 exceeds kafka.topicPartitions=6" \
    "${base[@]}" --set consumer.replicaCount=8
notes_case "list the schedules and their gaps command" \
    "runledger schedules gaps" -f "$chart/ci/all-on-values.yaml"
notes_case "list the schedules' CronJobs" "rl-runledger-acme-daily-summary" \
    -f "$chart/ci/all-on-values.yaml" --set scheduler.enabled=false

# README.md documents every value of values.yaml.
[ -f "$chart/README.md" ] || die "no $chart/README.md"
undocumented=$(grep -o '## @param [^ ]*' "$chart/values.yaml" | awk '{print $3}' |
    while read -r key; do
        grep -qF "\`$key\`" "$chart/README.md" || echo "$key"
    done)
if [ -z "$undocumented" ]; then
    ok "README.md documents every value"
else
    printf '%s\n' "$undocumented" >"$work/readme.out"
    not_ok "README.md documents every value (missing below)" "$work/readme.out"
fi

# values.schema.json is what gen_values_schema.py makes of values.yaml.
if python3 "$here/gen_values_schema.py" --check >"$work/schema.out" 2>&1; then
    ok "values.schema.json matches values.yaml (gen_values_schema.py)"
else
    not_ok "values.schema.json matches values.yaml (gen_values_schema.py)" "$work/schema.out"
fi

log "finished in $(($(date +%s) - start))s"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
