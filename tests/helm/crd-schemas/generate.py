#!/usr/bin/env python3
"""Turn CustomResourceDefinition YAML into kubeconform JSON schemas.

Usage: generate.py OUTDIR CRD.yaml...

Writes OUTDIR/<group>/<kind lowercase>_<version>.json for every served
version, the layout kubeconform's CRD schema-location template
'{{.Group}}/{{.ResourceKind}}_{{.ResourceAPIVersion}}.json' expects. The
schemas are strict like kubeconform's -strict for built-in kinds: an object
that declares properties and neither additionalProperties nor
x-kubernetes-preserve-unknown-fields rejects unknown fields, so a misspelt
key in a chart template fails validation instead of being ignored by the API
server. x-kubernetes-int-or-string becomes "integer or string".

The committed schemas come from these upstream CRDs (GitHub repositories,
at release tags):
  kedacore/keda v2.20.2 (68a5b5028f35b22d50597c69819ab32c4e92f21a)
    config/crd/bases/keda.sh_scaledobjects.yaml
    config/crd/bases/keda.sh_triggerauthentications.yaml
  prometheus-operator/prometheus-operator v0.93.0
  (f8fafd475f3d132e239432ae6172de60a6cb6516)
    example/prometheus-operator-crd/monitoring.coreos.com_servicemonitors.yaml
    example/prometheus-operator-crd/monitoring.coreos.com_prometheusrules.yaml
  (the Go module proxy serves the same tree: `go mod download -json
  github.com/prometheus-operator/prometheus-operator@v0.93.0` reports that
  commit as its Origin hash, and the module's Dir holds example/)

Needs PyYAML. Only run to refresh the committed schemas; check.sh reads the
JSON files and never runs this.
"""
import json
import os
import sys

import yaml


def strictify(node):
    if isinstance(node, list):
        return [strictify(n) for n in node]
    if not isinstance(node, dict):
        return node
    out = {}
    for key, value in node.items():
        if key == "x-kubernetes-int-or-string" and value:
            continue
        out[key] = strictify(value)
    if node.get("x-kubernetes-int-or-string"):
        out.pop("type", None)
        out["oneOf"] = [{"type": "integer"}, {"type": "string"}]
    if ("properties" in out and "additionalProperties" not in out
            and not out.get("x-kubernetes-preserve-unknown-fields")):
        out["additionalProperties"] = False
    return out


def main(argv):
    outdir = argv[1]
    for path in argv[2:]:
        with open(path) as fp:
            crd = yaml.safe_load(fp)
        group = crd["spec"]["group"]
        kind = crd["spec"]["names"]["kind"]
        for version in crd["spec"]["versions"]:
            if not version.get("served", True):
                continue
            schema = strictify(version["schema"]["openAPIV3Schema"])
            props = schema.setdefault("properties", {})
            props["apiVersion"] = {"type": "string",
                                   "enum": [group + "/" + version["name"]]}
            props["kind"] = {"type": "string", "enum": [kind]}
            schema["$schema"] = "http://json-schema.org/draft-07/schema#"
            schema["x-source"] = os.path.basename(path)
            target = os.path.join(outdir, group,
                                  "%s_%s.json" % (kind.lower(),
                                                  version["name"]))
            os.makedirs(os.path.dirname(target), exist_ok=True)
            with open(target, "w") as fp:
                json.dump(schema, fp, indent=1, sort_keys=True)
                fp.write("\n")
            print(target)


if __name__ == "__main__":
    main(sys.argv)
