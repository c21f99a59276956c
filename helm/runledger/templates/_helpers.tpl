{{/*
Names, labels and shared pod fragments of the runledger chart. Layout after
`helm create`, conventions after Bitnami charts.
*/}}

{{/* Chart name, overridable by nameOverride. */}}
{{- define "runledger.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
Fully qualified app name, truncated to 63 characters (DNS label limit).
A release name that already contains the chart name is used as is.
*/}}
{{- define "runledger.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{/* Chart name and version for the helm.sh/chart label. */}}
{{- define "runledger.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Labels of every resource. */}}
{{- define "runledger.labels" -}}
helm.sh/chart: {{ include "runledger.chart" . }}
{{ include "runledger.selectorLabels" . }}
app.kubernetes.io/version: {{ .Values.image.tag | default .Chart.AppVersion | trunc 63 | trimSuffix "-" | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: runledger
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/* Selector labels: stable across upgrades, never add to them. */}}
{{- define "runledger.selectorLabels" -}}
app.kubernetes.io/name: {{ include "runledger.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/*
Labels of one component: (dict "ctx" $ "component" "consumer").
*/}}
{{- define "runledger.componentLabels" -}}
{{ include "runledger.labels" .ctx }}
app.kubernetes.io/component: {{ .component }}
{{- end }}

{{/* Selector labels of one component. */}}
{{- define "runledger.componentSelectorLabels" -}}
{{ include "runledger.selectorLabels" .ctx }}
app.kubernetes.io/component: {{ .component }}
{{- end }}

{{/* commonAnnotations as a metadata block, or nothing. */}}
{{- define "runledger.annotations" -}}
{{- with .Values.commonAnnotations }}
annotations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}

{{/* ServiceAccount of the long-running pods. */}}
{{- define "runledger.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "runledger.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/*
ServiceAccount of the migration hook: it runs before the chart's own
ServiceAccount exists on install, so it cannot use that one.
*/}}
{{- define "runledger.migrationServiceAccountName" -}}
{{- if .Values.migration.serviceAccountName }}
{{- .Values.migration.serviceAccountName }}
{{- else if and (not .Values.serviceAccount.create) .Values.serviceAccount.name }}
{{- .Values.serviceAccount.name }}
{{- else }}
{{- "default" }}
{{- end }}
{{- end }}

{{/* Image reference: registry/repository:tag or @digest. */}}
{{- define "runledger.image" -}}
{{- $repo := .Values.image.repository }}
{{- if .Values.image.registry }}
{{- $repo = printf "%s/%s" .Values.image.registry .Values.image.repository }}
{{- end }}
{{- if .Values.image.digest }}
{{- printf "%s@%s" $repo .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" $repo (.Values.image.tag | default .Chart.AppVersion | toString) }}
{{- end }}
{{- end }}

{{/* Name of the chart's Secret. */}}
{{- define "runledger.secretName" -}}
{{- printf "%s-secrets" (include "runledger.fullname" .) }}
{{- end }}

{{/* Name of the ConfigMap of settings. */}}
{{- define "runledger.configMapName" -}}
{{- printf "%s-config" (include "runledger.fullname" .) }}
{{- end }}

{{/* Name of the metrics Service. */}}
{{- define "runledger.metricsServiceName" -}}
{{- printf "%s-metrics" (include "runledger.fullname" .) }}
{{- end }}

{{/* Secret and key of DATABASE_URL. */}}
{{- define "runledger.databaseSecretName" -}}
{{- default (include "runledger.secretName" .) .Values.database.existingSecret }}
{{- end }}
{{- define "runledger.databaseSecretKey" -}}
{{- if .Values.database.existingSecret }}{{ .Values.database.existingSecretKey }}{{ else }}database-url{{ end }}
{{- end }}

{{/* Whether a model bearer token is configured, and where it lives. */}}
{{- define "runledger.modelKeyEnabled" -}}
{{- if or .Values.model.existingSecret .Values.model.apiKey }}true{{ end }}
{{- end }}
{{- define "runledger.modelSecretName" -}}
{{- default (include "runledger.secretName" .) .Values.model.existingSecret }}
{{- end }}
{{- define "runledger.modelSecretKey" -}}
{{- if .Values.model.existingSecret }}{{ .Values.model.existingSecretKey }}{{ else }}model-api-key{{ end }}
{{- end }}

{{/* Secret and key of the Kafka SASL password. */}}
{{- define "runledger.kafkaSaslSecretName" -}}
{{- default (include "runledger.secretName" .) .Values.kafka.sasl.existingSecret }}
{{- end }}
{{- define "runledger.kafkaSaslSecretKey" -}}
{{- if .Values.kafka.sasl.existingSecret }}{{ .Values.kafka.sasl.existingSecretPasswordKey }}{{ else }}kafka-sasl-password{{ end }}
{{- end }}

{{/* Whether a Kafka CA certificate is mounted, and where it lives. */}}
{{- define "runledger.kafkaCaEnabled" -}}
{{- if or .Values.kafka.tls.existingSecret .Values.kafka.tls.caCert }}true{{ end }}
{{- end }}
{{- define "runledger.kafkaCaSecretName" -}}
{{- default (include "runledger.secretName" .) .Values.kafka.tls.existingSecret }}
{{- end }}
{{- define "runledger.kafkaCaSecretKey" -}}
{{- if .Values.kafka.tls.existingSecret }}{{ .Values.kafka.tls.existingSecretKey }}{{ else }}kafka-ca.crt{{ end }}
{{- end }}

{{/* Whether the chart renders its own Secret (some secret is given inline). */}}
{{- define "runledger.createSecret" -}}
{{- if or (and .Values.database.url (not .Values.database.existingSecret)) (and .Values.model.apiKey (not .Values.model.existingSecret)) (and .Values.kafka.sasl.enabled .Values.kafka.sasl.password (not .Values.kafka.sasl.existingSecret)) (and .Values.kafka.tls.caCert (not .Values.kafka.tls.existingSecret)) }}true{{ end }}
{{- end }}

{{/* Whether the Kafka connection uses TLS. */}}
{{- define "runledger.kafkaTls" -}}
{{- if has .Values.kafka.securityProtocol (list "SSL" "SASL_SSL") }}true{{ end }}
{{- end }}

{{/* Mount paths of files taken from Secrets. */}}
{{- define "runledger.modelKeyPath" -}}/etc/runledger/model/api-key{{- end }}
{{- define "runledger.kafkaCaPath" -}}/etc/runledger/kafka-ca/ca.crt{{- end }}
{{- define "runledger.pgCaPath" -}}/etc/runledger/pg-ca/ca.crt{{- end }}

{{/*
librdkafka property name to RUNLEDGER_KAFKA_* variable:
"socket.keepalive.enable" -> RUNLEDGER_KAFKA_SOCKET_KEEPALIVE_ENABLE.
*/}}
{{- define "runledger.kafkaPropertyEnv" -}}
{{- printf "RUNLEDGER_KAFKA_%s" (. | replace "." "_" | replace "-" "_" | upper) }}
{{- end }}

{{/*
Environment of a process that talks to Kafka: the SASL password (and user
name, when it comes from a Secret). Non-secret settings are in the ConfigMap.
*/}}
{{- define "runledger.env.kafka" -}}
{{- if .Values.kafka.sasl.enabled }}
- name: RUNLEDGER_KAFKA_SASL_PASSWORD
  valueFrom:
    secretKeyRef:
      name: {{ include "runledger.kafkaSaslSecretName" . }}
      key: {{ include "runledger.kafkaSaslSecretKey" . }}
{{- if and .Values.kafka.sasl.existingSecret .Values.kafka.sasl.existingSecretUsernameKey }}
- name: RUNLEDGER_KAFKA_SASL_USERNAME
  valueFrom:
    secretKeyRef:
      name: {{ .Values.kafka.sasl.existingSecret }}
      key: {{ .Values.kafka.sasl.existingSecretUsernameKey }}
{{- end }}
{{- end }}
{{- end }}

{{/*
DATABASE_URL from its Secret. Called as (dict "ctx" $ "role" R) with R
owner, worker, relay or console: database.<R>.existingSecret when set (a
login in the role runledger_<R>), else the one URL of database.url or
database.existingSecret (a login that is a member of runledger_owner, or
of every role its pods need).
*/}}
{{- define "runledger.env.database" -}}
{{- $ctx := .ctx -}}
{{- $role := index $ctx.Values.database .role -}}
- name: DATABASE_URL
  valueFrom:
    secretKeyRef:
      {{- if $role.existingSecret }}
      name: {{ $role.existingSecret }}
      key: {{ $role.existingSecretKey }}
      {{- else }}
      name: {{ include "runledger.databaseSecretName" $ctx }}
      key: {{ include "runledger.databaseSecretKey" $ctx }}
      {{- end }}
{{- end }}

{{/* extraEnv common to every container, then the component's own. */}}
{{- define "runledger.env.extra" -}}
{{- with .ctx.Values.extraEnv }}
{{ toYaml . }}
{{- end }}
{{- with .extra }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/* envFrom: the settings ConfigMap plus extraEnvFrom. */}}
{{- define "runledger.envFrom" -}}
- configMapRef:
    name: {{ include "runledger.configMapName" . }}
{{- with .Values.extraEnvFrom }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/*
Volumes of a process that needs the database (db=true), the model key
(model=true) and/or Kafka (kafka=true): the /tmp emptyDir and the files from
Secrets. Called as (dict "ctx" $ "db" true "model" true "kafka" true);
"optional" true marks the Secret volumes optional (the migrate hook, which
checks them itself: see _secrets.tpl).
*/}}
{{- define "runledger.volumes" -}}
{{- $ctx := .ctx -}}
- name: tmp
  emptyDir:
    sizeLimit: 64Mi
{{- if and .model (include "runledger.modelKeyEnabled" $ctx) }}
- name: model-api-key
  secret:
    secretName: {{ include "runledger.modelSecretName" $ctx }}
    defaultMode: 0440
    items:
      - key: {{ include "runledger.modelSecretKey" $ctx }}
        path: api-key
{{- end }}
{{- if and .kafka (include "runledger.kafkaCaEnabled" $ctx) }}
- name: kafka-ca
  secret:
    secretName: {{ include "runledger.kafkaCaSecretName" $ctx }}
    defaultMode: 0444
    items:
      - key: {{ include "runledger.kafkaCaSecretKey" $ctx }}
        path: ca.crt
{{- end }}
{{- if and .db $ctx.Values.database.tls.existingSecret }}
- name: pg-ca
  secret:
    secretName: {{ $ctx.Values.database.tls.existingSecret }}
    defaultMode: 0444
    {{- if .optional }}
    optional: true
    {{- end }}
    items:
      - key: {{ $ctx.Values.database.tls.existingSecretKey }}
        path: ca.crt
{{- end }}
{{- if $ctx.Values.metrics.token.existingSecret }}
- name: metrics-token
  secret:
    secretName: {{ $ctx.Values.metrics.token.existingSecret }}
    defaultMode: 0440
    {{- if .optional }}
    optional: true
    {{- end }}
    items:
      - key: {{ $ctx.Values.metrics.token.existingSecretKey }}
        path: token
{{- end }}
{{- end }}

{{/* volumeMounts matching runledger.volumes (same arguments). */}}
{{- define "runledger.volumeMounts" -}}
{{- $ctx := .ctx -}}
- name: tmp
  mountPath: /tmp
{{- if and .model (include "runledger.modelKeyEnabled" $ctx) }}
- name: model-api-key
  mountPath: /etc/runledger/model
  readOnly: true
{{- end }}
{{- if and .kafka (include "runledger.kafkaCaEnabled" $ctx) }}
- name: kafka-ca
  mountPath: /etc/runledger/kafka-ca
  readOnly: true
{{- end }}
{{- if and .db $ctx.Values.database.tls.existingSecret }}
- name: pg-ca
  mountPath: /etc/runledger/pg-ca
  readOnly: true
{{- end }}
{{- if $ctx.Values.metrics.token.existingSecret }}
- name: metrics-token
  mountPath: /etc/runledger/metrics-token
  readOnly: true
{{- end }}
{{- end }}

{{/*
HTTP probe on the metrics port: (dict "probe" .Values.consumer.livenessProbe
"path" "/healthz").
*/}}
{{- define "runledger.httpProbe" -}}
httpGet:
  path: {{ .path }}
  port: http-metrics
initialDelaySeconds: {{ .probe.initialDelaySeconds }}
periodSeconds: {{ .probe.periodSeconds }}
timeoutSeconds: {{ .probe.timeoutSeconds }}
failureThreshold: {{ .probe.failureThreshold }}
successThreshold: {{ .probe.successThreshold }}
{{- end }}

{{/*
Pod annotations that roll the pods when settings or secrets change.
*/}}
{{- define "runledger.checksumAnnotations" -}}
checksum/config: {{ include (print .Template.BasePath "/configmap.yaml") . | sha256sum }}
{{- if include "runledger.createSecret" . }}
checksum/secret: {{ include (print .Template.BasePath "/secret.yaml") . | sha256sum }}
{{- end }}
{{- end }}

{{/*
Compile all warnings into a single message, and call fail.
Each runledger.validateValues.* helper returns one message or nothing.
*/}}
{{- define "runledger.validateValues" -}}
{{- $messages := list -}}
{{- $messages = append $messages (include "runledger.validateValues.database" .) -}}
{{- $messages = append $messages (include "runledger.validateValues.relay" .) -}}
{{- $messages = append $messages (include "runledger.validateValues.grace" .) -}}
{{- $messages = append $messages (include "runledger.validateValues.kafkaSasl" .) -}}
{{- $messages = append $messages (include "runledger.validateValues.kafkaTls" .) -}}
{{- $messages = append $messages (include "runledger.validateValues.httpPort" .) -}}
{{- $messages = append $messages (include "runledger.validateValues.backoff" .) -}}
{{- $messages = append $messages (include "runledger.validateValues.storedCompletions" .) -}}
{{- $messages = append $messages (include "runledger.validateValues.keda" .) -}}
{{- $messages = append $messages (include "runledger.validateValues.schedules" .) -}}
{{- $messages = append $messages (include "runledger.validateValues.existingSecrets" . | trim) -}}
{{- $messages = append $messages (include "runledger.validateValues.consoleProxy" .) -}}
{{- $messages = without $messages "" -}}
{{- $message := join "\n" $messages -}}
{{- if $message -}}
{{- printf "\nVALUES VALIDATION:\n%s" $message | fail -}}
{{- end -}}
{{- end -}}

{{- define "runledger.validateValues.database" -}}
{{- $db := .Values.database -}}
{{- $perRole := and $db.owner.existingSecret $db.worker.existingSecret $db.relay.existingSecret $db.console.existingSecret -}}
{{- if and (not $db.url) (not $db.existingSecret) (not $perRole) -}}
runledger: database
    No PostgreSQL connection is configured. Set database.url (stored in the
    chart's Secret) or database.existingSecret (a Secret you manage, key
    database.existingSecretKey) to a connection URI, or a Secret for every
    role: database.owner, .worker, .relay and .console.existingSecret.
{{- end -}}
{{- end -}}

{{- define "runledger.validateValues.storedCompletions" -}}
{{- if and .Values.config.storedCompletions (eq .Values.config.ambiguousPolicy "dedupe") -}}
runledger: storedCompletions
    config.storedCompletions=true names the attempt in every call's
    metadata, so a retry's body differs from the first one's and an
    endpoint that deduplicates refuses it: set config.ambiguousPolicy to
    retry_once or park, or leave config.storedCompletions=false (an
    endpoint that deduplicates needs no lookup).
{{- end -}}
{{- end -}}

{{- define "runledger.validateValues.relay" -}}
{{- if and .Values.relay.enabled .Values.consumer.relayInProcess -}}
runledger: relay
    relay.enabled=true runs the outbox relay as its own Deployment, so the
    consumers must not run it too: set consumer.relayInProcess=false
    (RUNLEDGER_RELAY=false), or leave relay.enabled=false.
{{- end -}}
{{- end -}}

{{/*
A consumer's or relay's terminationGracePeriodSeconds: the one set, or
(0) config.shutdownGraceSeconds + 15, past the process's own watchdog,
which ends it at the grace + 10 s (RL_SHUTDOWN_MARGIN_SECONDS) whatever a
library is doing: the kubelet's SIGKILL never cuts the leases' release.
Called as (dict "ctx" $ "spec" .Values.consumer).
*/}}
{{- define "runledger.terminationGrace" -}}
{{- $set := int .spec.terminationGracePeriodSeconds -}}
{{- if gt $set 0 -}}
{{- $set -}}
{{- else -}}
{{- add (int .ctx.Values.config.shutdownGraceSeconds) 15 -}}
{{- end -}}
{{- end -}}

{{- define "runledger.validateValues.grace" -}}
{{- $grace := add (int .Values.config.shutdownGraceSeconds) 10 -}}
{{- $bad := list -}}
{{- if and (gt (int .Values.consumer.terminationGracePeriodSeconds) 0) (le (int .Values.consumer.terminationGracePeriodSeconds) $grace) -}}
{{- $bad = append $bad (printf "consumer.terminationGracePeriodSeconds=%d" (int .Values.consumer.terminationGracePeriodSeconds)) -}}
{{- end -}}
{{- if and .Values.relay.enabled (gt (int .Values.relay.terminationGracePeriodSeconds) 0) (le (int .Values.relay.terminationGracePeriodSeconds) $grace) -}}
{{- $bad = append $bad (printf "relay.terminationGracePeriodSeconds=%d" (int .Values.relay.terminationGracePeriodSeconds)) -}}
{{- end -}}
{{- if $bad -}}
runledger: terminationGracePeriodSeconds
    {{ join ", " $bad }} must exceed config.shutdownGraceSeconds + 10 = {{ $grace }}
    (or be 0: the grace + 15): Kubernetes kills the pod at the end of its
    grace period, before Runledger has finished in-flight runs, released
    the leases of the rest and committed the done offsets.
{{- end -}}
{{- end -}}

{{- define "runledger.validateValues.kafkaSasl" -}}
{{- if .Values.kafka.sasl.enabled -}}
{{- if not (hasPrefix "SASL_" .Values.kafka.securityProtocol) -}}
runledger: kafka.sasl
    kafka.sasl.enabled=true needs kafka.securityProtocol SASL_SSL (or
    SASL_PLAINTEXT), not "{{ .Values.kafka.securityProtocol }}".
{{- else if and (not .Values.kafka.sasl.password) (not .Values.kafka.sasl.existingSecret) -}}
runledger: kafka.sasl
    kafka.sasl.enabled=true needs kafka.sasl.password or
    kafka.sasl.existingSecret.
{{- else if and (not .Values.kafka.sasl.username) (not (and .Values.kafka.sasl.existingSecret .Values.kafka.sasl.existingSecretUsernameKey)) -}}
runledger: kafka.sasl
    kafka.sasl.enabled=true needs kafka.sasl.username, or
    kafka.sasl.existingSecret with kafka.sasl.existingSecretUsernameKey.
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "runledger.validateValues.kafkaTls" -}}
{{- if and (include "runledger.kafkaCaEnabled" .) (not (include "runledger.kafkaTls" .)) -}}
runledger: kafka.tls
    A Kafka CA certificate is configured but kafka.securityProtocol is
    "{{ .Values.kafka.securityProtocol }}": set it to SSL or SASL_SSL, or drop
    the certificate.
{{- end -}}
{{- end -}}

{{- define "runledger.validateValues.httpPort" -}}
{{- if eq (int .Values.config.httpPort) 0 -}}
runledger: config.httpPort
    config.httpPort=0 turns the health and metrics server off, but the
    probes and the metrics Service need it: use a port such as 9464.
{{- end -}}
{{- end -}}

{{- define "runledger.validateValues.backoff" -}}
{{- if lt (int .Values.config.backoffMaxMs) (int .Values.config.backoffBaseMs) -}}
runledger: config.backoffMaxMs
    config.backoffMaxMs={{ int .Values.config.backoffMaxMs }} is below config.backoffBaseMs={{ int .Values.config.backoffBaseMs }};
    the binary refuses to start with that.
{{- end -}}
{{- end -}}

{{- define "runledger.validateValues.keda" -}}
{{- if .Values.keda.enabled -}}
{{- $max := int (include "runledger.kedaMaxReplicas" .) -}}
{{- if gt (int .Values.keda.minReplicaCount) $max -}}
runledger: keda
    keda.minReplicaCount={{ .Values.keda.minReplicaCount }} exceeds the maximum {{ $max }}
    (keda.maxReplicaCount, or kafka.topicPartitions when that is 0).
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "runledger.validateValues.schedules" -}}
{{- $seen := dict -}}
{{- $fullname := include "runledger.fullname" . -}}
{{- range $i, $s := .Values.schedules -}}
{{- $name := $s.name | default (printf "#%d" $i) -}}
{{- if hasKey $seen $name }}
runledger: schedules
    schedule name "{{ $name }}" is used twice; CronJob names must be unique.
{{- end -}}
{{- $_ := set $seen $name true -}}
{{- range $field := list "name" "cron" "job" "tenant" "version" "window" -}}
{{- if not (get $s $field) }}
runledger: schedules
    schedule {{ $name }} has no "{{ $field }}".
{{- end -}}
{{- end -}}
{{- if not (kindIs "map" $s.request) }}
runledger: schedules
    schedule {{ $name }}: "request" must be an object (the model request:
    model, messages, generation settings), not {{ kindOf $s.request }}.
{{- end -}}
{{- if gt (len (printf "%s-%s" $fullname $name)) 52 }}
runledger: schedules
    schedule {{ $name }}: CronJob name "{{ $fullname }}-{{ $name }}" is longer
    than 52 characters; shorten the schedule name or fullnameOverride.
{{- end -}}
{{- end -}}
{{- end -}}

{{/* KEDA's maximum: keda.maxReplicaCount, else the partition count. */}}
{{- define "runledger.kedaMaxReplicas" -}}
{{- if gt (int .Values.keda.maxReplicaCount) 0 }}{{ int .Values.keda.maxReplicaCount }}{{ else }}{{ int .Values.kafka.topicPartitions }}{{ end }}
{{- end }}

{{/* SASL mechanism in the words of KEDA's kafka scaler. */}}
{{- define "runledger.kedaSasl" -}}
{{- $m := .Values.kafka.sasl.mechanism }}
{{- if eq $m "SCRAM-SHA-512" }}scram_sha512{{ else if eq $m "SCRAM-SHA-256" }}scram_sha256{{ else if eq $m "PLAIN" }}plaintext{{ else }}none{{ end }}
{{- end }}

{{- define "runledger.validateValues.consoleProxy" -}}
{{- $c := .Values.console -}}
{{- if and $c.enabled $c.trustedUserHeader (or (not .Values.networkPolicy.enabled) (not $c.networkPolicy.from)) -}}
runledger: console.trustedUserHeader
    Proxy mode trusts the user header from console.trustedProxies, so only
    the authenticating proxy may reach the console's port. Keep
    networkPolicy.enabled=true and set console.networkPolicy.from to the
    proxy's (or the ingress controller's) pods or namespace.
{{- end -}}
{{- end -}}

