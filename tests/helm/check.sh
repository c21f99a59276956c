#!/usr/bin/env bash
# check.sh — the Helm chart lints, renders and validates against the
# Kubernetes API schemas, offline. CTest: helm_chart_renders_and_validates.
#
# Tools (pinned, built once from the Go module proxy into .cache/bin/):
#   helm        helm.sh/helm/v3/cmd/helm@v3.22.0, with the ldflags of helm's
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
# default image is runledger:<project VERSION> (what `make image` builds);
# the dashboard ConfigMap, PrometheusRule, receiver, console and
# NetworkPolicy render as their values say (sidecar label, alerts scoped to the release's
# metrics Service, egress ports);
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

HELM_VERSION=v3.22.0
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
    GOBIN=$bin GOFLAGS=-mod=mod CGO_ENABLED=0 \
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

# Pod-level rules on a rendered file (PyYAML; present on these machines).
policy_case() { # <name> <file> [default: the image must be the default one]
    if python3 - "$2" "$root" "${3:-}" >"$work/policy-$1.out" 2>&1 <<'EOF'; then
import re, sys
import yaml

path, root, default_image = sys.argv[1], sys.argv[2], sys.argv[3] == "default"
docs = [d for d in yaml.safe_load_all(open(path)) if d]
version = re.search(r'project\(runledger VERSION ([0-9.]+)',
                    open(root + "/CMakeLists.txt").read()).group(1)
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
            continue  # the helm test's wget pod
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
        if default_image and image != "runledger:" + version:
            problems.append("%s: default image %s is not runledger:%s (make image)"
                            % (cw, image, version))
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

# Inline secrets and the other halves of the existingSecret choices.
validate_case inline-secrets -f "$chart/ci/default-values.yaml" \
    --set database.existingSecret= --set database.url=postgresql://rl@db/rl \
    --set model.apiKey=k --set kafka.securityProtocol=SASL_SSL \
    --set kafka.sasl.enabled=true --set kafka.sasl.username=rl \
    --set kafka.sasl.password=p --set kafka.tls.caCert=PEM \
    --set keda.enabled=true --set relay.enabled=true \
    --set consumer.relayInProcess=false

kubeconform_all
monitoring_case

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
