#!/usr/bin/env python3
"""Generate helm/runledger/values.schema.json from values.yaml.

Usage: gen_values_schema.py [--check]

Types come from the defaults in values.yaml, descriptions from its
`## @param` comments, and the constraints (enums, the bounds of the binary's
config table in common/src/config.c, the schedule item shape) from the
tables below. Every nested object is closed (additionalProperties: false) so
a misspelt value fails `helm install` instead of being ignored; the free-form
maps (labels, annotations, resources, affinity, ...) stay open.

--check compares instead of writing and exits 1 when the committed schema is
stale (tests/helm/check.sh runs it). Needs PyYAML.
"""
import json
import os
import re
import sys

import yaml

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
CHART = os.path.join(ROOT, "helm", "runledger")

# Maps whose keys are the user's (labels, annotations, node selectors).
STRING_MAPS = {
    "commonLabels", "commonAnnotations", "serviceAccount.annotations",
    "metrics.service.annotations", "metrics.serviceMonitor.labels",
    "consumer.podLabels", "consumer.podAnnotations", "relay.podLabels",
    "scheduler.podLabels", "scheduler.podAnnotations", "scheduler.nodeSelector",
    "relay.podAnnotations", "migration.podAnnotations",
    "consumer.nodeSelector", "relay.nodeSelector", "migration.nodeSelector",
    "metrics.grafanaDashboard.labels", "metrics.grafanaDashboard.annotations",
    "metrics.prometheusRule.labels", "metrics.prometheusRule.alertLabels",
    "receiver.podLabels", "receiver.podAnnotations", "receiver.nodeSelector",
    "console.podLabels", "console.podAnnotations", "console.nodeSelector",
    "console.service.annotations", "console.ingress.annotations",
}
# Kubernetes or KEDA objects passed through as they are.
OPEN_OBJECTS = {
    "podSecurityContext", "containerSecurityContext", "consumer.resources",
    "relay.resources", "migration.resources", "scheduleDefaults.resources",
    "scheduler.resources", "scheduler.affinity", "scheduler.updateStrategy",
    "consumer.affinity", "relay.affinity", "migration.affinity",
    "consumer.updateStrategy", "relay.updateStrategy", "keda.advanced",
    "keda.fallback", "receiver.resources", "receiver.affinity",
    "purge.resources", "console.resources", "console.affinity",
}


def rng(lo, hi):
    return {"type": "integer", "minimum": lo, "maximum": hi}


def objects():
    return {"type": "array", "items": {"type": "object"}}


def env_list():
    return {"type": "array",
            "items": {"type": "object", "required": ["name"]}}


PULL = {"type": "string", "enum": ["Always", "IfNotPresent", "Never"]}
INT_OR_PERCENT = {"anyOf": [{"type": "integer", "minimum": 0},
                            {"type": "string", "pattern": "^([0-9]+%?)?$"}]}
PROM_DURATION = {"type": "string", "pattern": "^(([0-9]+(ms|s|m|h))+)?$"}
PROM_WINDOW = {"type": "string", "pattern": "^([0-9]+(ms|s|m|h|d|w|y))+$"}
ISO_DURATION = ("^P(?:[0-9]+W|(?:[0-9]+Y)?(?:[0-9]+M)?(?:[0-9]+D)?"
                "(?:T(?:[0-9]+H)?(?:[0-9]+M)?(?:[0-9]+S)?)?)$")

OVERRIDES = {
    "image.pullPolicy": PULL,
    "image.repository": {"type": "string", "minLength": 1},
    "image.digest": {"type": "string", "pattern": "^(sha256:[a-f0-9]{64})?$"},
    "imagePullSecrets": {"type": "array", "items": {
        "type": "object", "required": ["name"],
        "properties": {"name": {"type": "string"}}}},
    "kafka.bootstrapServers": {"type": "string", "minLength": 1},
    "kafka.groupId": {"type": "string", "minLength": 1},
    "kafka.topic": {"type": "string", "minLength": 1},
    "kafka.notifyTopic": {"type": "string", "minLength": 1},
    "kafka.dlqTopic": {"type": "string", "minLength": 1},
    "kafka.topicPartitions": rng(1, 100000),
    "kafka.securityProtocol": {"type": "string", "enum": [
        "", "PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"]},
    "kafka.sasl.mechanism": {"type": "string", "enum": [
        "SCRAM-SHA-512", "SCRAM-SHA-256", "PLAIN"]},
    "kafka.properties": {
        "type": "object",
        "additionalProperties": {"type": ["string", "integer", "boolean",
                                          "number"]},
        "propertyNames": {"pattern": "^[a-z][a-z0-9.]*$"}},
    "database.sslMode": {"type": "string", "enum": [
        "", "disable", "allow", "prefer", "require", "verify-ca",
        "verify-full"]},
    "model.baseUrl": {"type": "string", "pattern": "^https?://"},
    # The bounds of common/src/config.c.
    "model.connectTimeoutMs": rng(1, 600000),
    "model.timeoutMs": rng(1, 3600000),
    "model.maxResponseBytes": rng(1024, 1073741824),
    "config.logLevel": {"type": "string",
                        "enum": ["debug", "info", "warn", "error"]},
    "config.ambiguousPolicy": {"type": "string",
                               "enum": ["dedupe", "retry_once", "park"]},
    "config.reconcileSettleMs": rng(0, 3600000),
    "config.modelApi": {"type": "string", "enum": ["chat", "responses"]},
    "config.modelApiByModel": {
        "type": "string",
        "pattern": "^(( *[^=, ]+ *= *(chat|responses) *)(, *[^=, ]+ *= *"
                   "(chat|responses) *)*,?)?$"},
    "config.maxInFlight": rng(1, 100000),
    "config.maxHeldBytes": rng(1048576, 2147483647),
    "config.maxRequestBytes": rng(1024, 1073741824),
    "config.leaseSeconds": rng(2, 86400),
    "config.maxAttempts": rng(1, 100),
    "config.runDeadlineSeconds": rng(1, 31536000),
    "config.backoffBaseMs": rng(1, 3600000),
    "config.backoffMaxMs": rng(1, 86400000),
    "config.maxEventBytes": rng(256, 67108864),
    "config.sweepIntervalMs": rng(10, 600000),
    "config.relayBatch": rng(1, 100000),
    "config.relayBatchBytes": rng(65536, 1073741824),
    "config.relayIntervalMs": rng(1, 600000),
    "config.dbBatch": rng(1, 10000),
    "config.livenessSeconds": rng(1, 3600),
    "config.healthIntervalSeconds": rng(1, 3600),
    "config.httpPort": rng(0, 65535),
    "config.shutdownGraceSeconds": rng(0, 3600),
    "extraEnv": env_list(),
    "consumer.extraEnv": env_list(),
    "relay.extraEnv": env_list(),
    "scheduler.extraEnv": env_list(),
    "scheduler.replicaCount": rng(0, 100),
    "scheduler.revisionHistoryLimit": rng(0, 1000),
    "scheduler.tolerations": objects(),
    "scheduler.catchup": {"type": "string",
                          "enum": ["skip", "latest", "all"]},
    "extraEnvFrom": objects(),
    "consumer.replicaCount": rng(0, 100000),
    "relay.replicaCount": rng(0, 1000),
    "consumer.terminationGracePeriodSeconds": rng(0, 86400),
    "relay.terminationGracePeriodSeconds": rng(0, 86400),
    "consumer.revisionHistoryLimit": rng(0, 1000),
    "relay.revisionHistoryLimit": rng(0, 1000),
    "consumer.pdb.minAvailable": INT_OR_PERCENT,
    "consumer.pdb.maxUnavailable": INT_OR_PERCENT,
    "relay.pdb.minAvailable": INT_OR_PERCENT,
    "relay.pdb.maxUnavailable": INT_OR_PERCENT,
    "consumer.tolerations": objects(),
    "relay.tolerations": objects(),
    "migration.tolerations": objects(),
    "consumer.topologySpreadConstraints": objects(),
    "relay.topologySpreadConstraints": objects(),
    "scheduler.topologySpreadConstraints": objects(),
    "migration.backoffLimit": rng(0, 100),
    "migration.activeDeadlineSeconds": rng(1, 86400),
    # runledger migrate --wait takes 0 to 3600.
    "migration.waitSeconds": rng(0, 3600),
    "migration.ttlSecondsAfterFinished": rng(0, 31536000),
    "migration.extraArgs": {"type": "array", "items": {"type": "string"}},
    "scheduleDefaults.concurrencyPolicy": {
        "type": "string", "enum": ["Allow", "Forbid", "Replace"]},
    "scheduleDefaults.startingDeadlineSeconds": rng(1, 86400),
    "scheduleDefaults.successfulJobsHistoryLimit": rng(0, 100),
    "scheduleDefaults.failedJobsHistoryLimit": rng(0, 100),
    "scheduleDefaults.backoffLimit": rng(0, 100),
    "scheduleDefaults.activeDeadlineSeconds": rng(1, 86400),
    "purge.schedule": {"type": "string", "minLength": 1},
    "purge.olderThan": {"type": "string", "pattern": "^[1-9][0-9]*[dhm]$"},
    "purge.statuses": {"type": "array", "uniqueItems": True,
                       "items": {"type": "string",
                                 "enum": ["completed", "failed", "cancelled"]}},
    "purge.batch": rng(1, 100000),
    "purge.concurrencyPolicy": {
        "type": "string", "enum": ["Allow", "Forbid", "Replace"]},
    "purge.startingDeadlineSeconds": rng(1, 86400),
    "purge.successfulJobsHistoryLimit": rng(0, 100),
    "purge.failedJobsHistoryLimit": rng(0, 100),
    "purge.backoffLimit": rng(0, 100),
    "purge.activeDeadlineSeconds": rng(1, 86400),
    "metrics.service.type": {"type": "string", "enum": [
        "ClusterIP", "NodePort", "LoadBalancer"]},
    "metrics.service.port": rng(1, 65535),
    "metrics.serviceMonitor.interval": PROM_DURATION,
    "metrics.serviceMonitor.scrapeTimeout": PROM_DURATION,
    "metrics.serviceMonitor.relabelings": objects(),
    "metrics.serviceMonitor.metricRelabelings": objects(),
    "keda.minReplicaCount": rng(0, 100000),
    "keda.maxReplicaCount": rng(0, 100000),
    "keda.pollingInterval": rng(1, 86400),
    "keda.cooldownPeriod": rng(0, 86400),
    "keda.lagThreshold": rng(1, 1000000000),
    "keda.activationLagThreshold": rng(0, 1000000000),
    "keda.offsetResetPolicy": {"type": "string",
                               "enum": ["earliest", "latest"]},
    "metrics.grafanaDashboard.labelName": {
        "type": "string", "minLength": 1,
        "pattern": "^([a-z0-9.-]+/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$"},
    "metrics.grafanaDashboard.labelValue": {
        "type": "string", "maxLength": 63,
        "pattern": "^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?$"},
    "metrics.prometheusRule.alerts.consumerLagGrowing.minLag": rng(0, 1000000000),
    "metrics.prometheusRule.alerts.outboxDeliveryDelayed.seconds": rng(1, 31536000),
    "metrics.prometheusRule.alerts.outboxBacklogGrowing.minRows": rng(0, 1000000000),
    "metrics.prometheusRule.alerts.deadLetters.threshold": rng(0, 1000000000),
    "metrics.prometheusRule.alerts.deadLetters.window": PROM_WINDOW,
    "metrics.prometheusRule.alerts.extraGenerations.window": PROM_WINDOW,
    "metrics.prometheusRule.alerts.runsFailing.ratio": {
        "type": "string", "pattern": "^(0(\\.[0-9]+)?|1(\\.0+)?)$"},
    "metrics.prometheusRule.additionalRules": objects(),
    "receiver.groupId": {"type": "string", "minLength": 1},
    "console.replicaCount": rng(0, 1000),
    "console.revisionHistoryLimit": rng(0, 1000),
    "console.port": rng(1, 65535),
    "console.baseUrl": {"type": "string", "pattern": "^(https?://[^/?#]+/?)?$"},
    "console.sessionTtlSeconds": rng(60, 2592000),
    "console.trustedProxies": {"type": "array", "items": {
        "type": "string", "minLength": 1}},
    "console.service.type": {"type": "string", "enum": [
        "ClusterIP", "NodePort", "LoadBalancer"]},
    "console.networkPolicy.from": objects(),
    "console.extraEnv": env_list(),
    "console.tolerations": objects(),
    "receiver.replicaCount": rng(0, 1000),
    "receiver.terminationGracePeriodSeconds": rng(1, 86400),
    "receiver.extraEnv": env_list(),
    "receiver.tolerations": objects(),
    "networkPolicy.metricsFrom": objects(),
    "networkPolicy.extraEgress": objects(),
    "networkPolicy.extraIngress": objects(),
    "schedules": {
        "type": "array",
        "items": {
            "type": "object",
            "additionalProperties": False,
            "required": ["name", "cron", "job", "tenant", "version",
                         "window", "request"],
            "properties": {
                "name": {"type": "string", "maxLength": 40,
                         "pattern": "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$",
                         "description": "DNS label; the CronJob is "
                         "<fullname>-<name> (at most 52 characters)"},
                "cron": {"type": "string", "minLength": 1,
                         "description": "cron expression of the CronJob"},
                "timeZone": {"type": "string",
                             "description": "IANA time zone of the cron "
                             "expression (default: the controller's, "
                             "usually UTC)"},
                "suspend": {"type": "boolean",
                            "description": "suspend this schedule"},
                "job": {"type": "string", "minLength": 1,
                        "description": "job name (part of the run "
                        "identity)"},
                "tenant": {"type": "string", "minLength": 1,
                           "description": "tenant (part of the run "
                           "identity; the Kafka key)"},
                "version": {"type": ["string", "integer"],
                            "description": "job version (part of the run "
                            "identity; a new answer needs a new version)"},
                "window": {"type": "string", "pattern": ISO_DURATION,
                           "description": "ISO 8601 duration of the "
                           "schedule window, e.g. PT1H or P1D"},
                "request": {"type": "object", "minProperties": 1,
                            "description": "the model request: model, "
                            "messages, generation settings, tools, output "
                            "schema"},
                "input": {"type": "object",
                          "description": "the collected source data "
                          "(optional)"},
                "notify": {"type": "array",
                           "items": {"type": "string", "minLength": 1},
                           "description": "outbox channels to notify on "
                           "completion"},
                "catchup": {"type": "string",
                            "enum": ["skip", "latest", "all"],
                            "description": "windows missed while no "
                            "scheduler ran: none, the last one, all"},
                "catchupWindow": {"type": "string", "pattern": ISO_DURATION,
                                  "description": "no missed window older "
                                  "than this is published"},
                "auditOnly": {"type": "boolean",
                              "description": "someone else publishes; the "
                              "ledger only audits the windows"},
            },
        },
    },
}
for alert in ("unknownRuns", "awaitingApproval", "notReady", "absent",
              "consumerLagGrowing",
              "outboxDeliveryDelayed", "outboxBacklogGrowing",
              "outboxRelayStalled", "deadLetters", "extraGenerations",
              "runsFailing"):
    a = "metrics.prometheusRule.alerts.%s." % alert
    OVERRIDES[a + "for"] = {"type": "string",
                            "pattern": "^([0-9]+(ms|s|m|h|d|w|y))+$"}
    OVERRIDES[a + "severity"] = {"type": "string", "minLength": 1}
for peer in ("dns", "postgresql", "kafka", "model"):
    OVERRIDES["networkPolicy.%s.to" % peer] = objects()
    OVERRIDES["networkPolicy.%s.ports" % peer] = {
        "type": "array", "items": rng(1, 65535)}
for comp in ("consumer", "relay"):
    for probe in ("livenessProbe", "readinessProbe", "startupProbe"):
        p = "%s.%s." % (comp, probe)
        OVERRIDES[p + "initialDelaySeconds"] = rng(0, 3600)
        OVERRIDES[p + "periodSeconds"] = rng(1, 3600)
        OVERRIDES[p + "timeoutSeconds"] = rng(1, 3600)
        OVERRIDES[p + "failureThreshold"] = rng(1, 1000)
        # Kubernetes requires 1 for liveness and startup probes.
        OVERRIDES[p + "successThreshold"] = (
            rng(1, 1000) if probe == "readinessProbe"
            else {"type": "integer", "const": 1})


def build():
    text = open(os.path.join(CHART, "values.yaml")).read()
    values = yaml.safe_load(text)
    desc = {m.group(1): m.group(2).strip() for m in re.finditer(
        r"## @param (\S+)(?: \[[^\]]*\])? (.*)", text)}
    undocumented = []

    def walk(node, path):
        key = ".".join(path)
        if key in OVERRIDES:
            schema = dict(OVERRIDES[key])
        elif key in STRING_MAPS:
            schema = {"type": "object",
                      "additionalProperties": {"type": "string"}}
        elif key in OPEN_OBJECTS:
            schema = {"type": "object"}
        elif isinstance(node, dict):
            schema = {"type": "object", "additionalProperties": False,
                      "properties": {k: walk(v, path + [k])
                                     for k, v in node.items()}}
        elif isinstance(node, bool):
            schema = {"type": "boolean"}
        elif isinstance(node, int):
            schema = {"type": "integer"}
        elif isinstance(node, str):
            schema = {"type": "string"}
        elif isinstance(node, list):
            schema = {"type": "array"}
        else:
            raise SystemExit("no type for value " + key)
        if key in desc and "description" not in schema:
            schema = {"description": desc[key], **schema}
        if path and key not in desc and "properties" not in schema:
            undocumented.append(key)
        return schema

    schema = {"$schema": "http://json-schema.org/draft-07/schema#",
              "title": "runledger chart values", **walk(values, [])}
    # Helm passes `global` to every chart, also to a top-level one.
    schema["properties"]["global"] = {
        "type": "object",
        "description": "Helm global values (unused by this chart)"}
    if undocumented:
        raise SystemExit("values without a ## @param line: " +
                         ", ".join(undocumented))
    return json.dumps(schema, indent=2) + "\n"


def main(argv):
    target = os.path.join(CHART, "values.schema.json")
    text = build()
    if "--check" in argv:
        with open(target) as fp:
            if fp.read() != text:
                print("%s is stale: run %s" % (target, argv[0]))
                return 1
        return 0
    with open(target, "w") as fp:
        fp.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
