{{/* The text of NOTES.txt, a named template so tests/helm/check.sh can render it with `helm template` (install --dry-run needs a cluster). */}}
{{- define "runledger.notes" -}}
Runledger {{ .Chart.AppVersion }} is installed as release "{{ .Release.Name }}" in namespace "{{ .Release.Namespace }}".

Image:      {{ include "runledger.image" . }}
Kafka:      {{ .Values.kafka.bootstrapServers }}  group {{ .Values.kafka.groupId }}, topic {{ .Values.kafka.topic }} ({{ .Values.kafka.topicPartitions }} partitions)
Model:      {{ .Values.model.baseUrl }}
{{- if .Values.keda.enabled }}
Consumers:  KEDA scales {{ include "runledger.fullname" . }}-consumer between {{ .Values.keda.minReplicaCount }} and {{ include "runledger.kedaMaxReplicas" . }} pods on the lag of group {{ .Values.kafka.groupId }}
{{- else }}
Consumers:  {{ .Values.consumer.replicaCount }} x {{ include "runledger.fullname" . }}-consumer
{{- end }}
{{- if .Values.relay.enabled }}
Relay:      {{ .Values.relay.replicaCount }} x {{ include "runledger.fullname" . }}-relay (separate Deployment)
{{- else }}
Relay:      inside each consumer (RUNLEDGER_RELAY=true)
{{- end }}
{{- if .Values.migration.enabled }}
Migration:  the {{ include "runledger.fullname" . }}-migrate hook Job ran `runledger migrate` before this release
{{- end }}

Consumers and partitions
  One consumer group member owns whole partitions of {{ .Values.kafka.topic }}; a
  consumer without a partition sits idle. Keep replicas <= partitions
  ({{ .Values.kafka.topicPartitions }}, kafka.topicPartitions).
{{- if and (not .Values.keda.enabled) (gt (int .Values.consumer.replicaCount) (int .Values.kafka.topicPartitions)) }}

  WARNING: consumer.replicaCount={{ .Values.consumer.replicaCount }} exceeds kafka.topicPartitions={{ .Values.kafka.topicPartitions }}:
  {{ sub (int .Values.consumer.replicaCount) (int .Values.kafka.topicPartitions) }} consumer(s) will hold no partition and only stand by.
{{- end }}
{{- if and .Values.keda.enabled (gt (int (include "runledger.kedaMaxReplicas" .)) (int .Values.kafka.topicPartitions)) }}

  WARNING: keda.maxReplicaCount={{ include "runledger.kedaMaxReplicas" . }} exceeds kafka.topicPartitions={{ .Values.kafka.topicPartitions }};
  KEDA's kafka scaler stops at the partition count (allowIdleConsumers=false).
{{- end }}
{{- if not (include "runledger.modelKeyEnabled" .) }}

  NOTE: no model.apiKey or model.existingSecret: model calls carry no
  Authorization header.
{{- end }}

Health and metrics
  kubectl -n {{ .Release.Namespace }} port-forward svc/{{ include "runledger.metricsServiceName" . }} {{ .Values.metrics.service.port }}
  curl -s localhost:{{ .Values.metrics.service.port }}/readyz     # 200: PostgreSQL and Kafka reachable, in the group
  curl -s localhost:{{ .Values.metrics.service.port }}/metrics | grep '^runledger_'
{{- if .Values.metrics.serviceMonitor.enabled }}
  Prometheus Operator scrapes it through ServiceMonitor {{ include "runledger.fullname" . }}.
{{- end }}

Operate
  kubectl -n {{ .Release.Namespace }} logs deploy/{{ include "runledger.fullname" . }}-consumer -f     # one JSON object per line
  kubectl -n {{ .Release.Namespace }} exec deploy/{{ include "runledger.fullname" . }}-consumer -- runledger runs list --status unknown
  kubectl -n {{ .Release.Namespace }} exec deploy/{{ include "runledger.fullname" . }}-consumer -- runledger runs show RUN_ID
  helm test {{ .Release.Name }} -n {{ .Release.Namespace }}
{{- if and .Values.schedules .Values.scheduler.enabled }}

Schedules (in the ledger; published by deploy/{{ include "runledger.fullname" . }}-scheduler, one active replica)
{{- range .Values.schedules }}
  {{ .name }}: "{{ .cron }}"{{ with .timeZone }} {{ . }}{{ end }}  job={{ .job }} tenant={{ .tenant }} version={{ .version }} window={{ .window }}
{{- end }}
  Windows without a run: kubectl -n {{ .Release.Namespace }} exec deploy/{{ include "runledger.fullname" . }}-scheduler -- runledger schedules gaps
{{- else if .Values.schedules }}

Schedules (CronJobs running `runledger publish --now --window ...`)
{{- range .Values.schedules }}
  {{ include "runledger.fullname" $ }}-{{ .name }}: "{{ .cron }}"{{ with .timeZone }} {{ . }}{{ end }}  job={{ .job }} tenant={{ .tenant }} version={{ .version }} window={{ .window }}
{{- end }}
  Publish one now: kubectl -n {{ .Release.Namespace }} create job --from=cronjob/{{ include "runledger.fullname" . }}-{{ (first .Values.schedules).name }} {{ (first .Values.schedules).name }}-manual
{{- end }}
{{- end }}
