{{/*
The Secrets the values name (existingSecret) and the check that they
exist. A pod that mounts a missing Secret waits in ContainerCreating and a
missing secretKeyRef in CreateContainerConfigError, while `helm install`
reports "deployed"; so the install checks them twice:

- at render, with `lookup`, when helm talks to a cluster (install,
  upgrade, `--dry-run=server`): the render fails naming the Secret. helm
  template, lint and a client dry run reach no cluster: there the lookup of
  the namespace's default ServiceAccount comes back empty and the check is
  skipped;
- in the migrate hook, which runs first: it mounts each of them optional
  (a missing one cannot hold the pod) and `runledger migrate
  --require-secret` exits 4, naming each one missing, before it connects.
  This covers renders without a cluster (GitOps tools, helm template).

The chart's own Secret is not listed: it is created with the release,
after the hook, from inline values.
*/}}

{{/*
The list, as JSON: [{"secret", "key", "value", "keyValue", "env"}], with
"value" the values key that names the Secret, "keyValue" the one that
names its key, and "env" the variable the hook reads it from (DATABASE_URL;
empty: a file of the hook's required-secrets volume).
*/}}
{{- define "runledger.existingSecrets" -}}
{{- $list := list -}}
{{- with .Values.database.existingSecret }}
{{- $list = append $list (dict "secret" . "key" $.Values.database.existingSecretKey "value" "database.existingSecret" "keyValue" "database.existingSecretKey" "env" "DATABASE_URL") }}
{{- end }}
{{- with .Values.database.tls.existingSecret }}
{{- $list = append $list (dict "secret" . "key" $.Values.database.tls.existingSecretKey "value" "database.tls.existingSecret" "keyValue" "database.tls.existingSecretKey" "env" "") }}
{{- end }}
{{- with .Values.model.existingSecret }}
{{- $list = append $list (dict "secret" . "key" $.Values.model.existingSecretKey "value" "model.existingSecret" "keyValue" "model.existingSecretKey" "env" "") }}
{{- end }}
{{- if and .Values.kafka.sasl.enabled .Values.kafka.sasl.existingSecret }}
{{- $list = append $list (dict "secret" .Values.kafka.sasl.existingSecret "key" .Values.kafka.sasl.existingSecretPasswordKey "value" "kafka.sasl.existingSecret" "keyValue" "kafka.sasl.existingSecretPasswordKey" "env" "") }}
{{- with .Values.kafka.sasl.existingSecretUsernameKey }}
{{- $list = append $list (dict "secret" $.Values.kafka.sasl.existingSecret "key" . "value" "kafka.sasl.existingSecret" "keyValue" "kafka.sasl.existingSecretUsernameKey" "env" "") }}
{{- end }}
{{- end }}
{{- with .Values.kafka.tls.existingSecret }}
{{- $list = append $list (dict "secret" . "key" $.Values.kafka.tls.existingSecretKey "value" "kafka.tls.existingSecret" "keyValue" "kafka.tls.existingSecretKey" "env" "") }}
{{- end }}
{{- with .Values.metrics.token.existingSecret }}
{{- $list = append $list (dict "secret" . "key" $.Values.metrics.token.existingSecretKey "value" "metrics.token.existingSecret" "keyValue" "metrics.token.existingSecretKey" "env" "") }}
{{- end }}
{{- toJson $list -}}
{{- end -}}

{{/* Where the migrate hook finds entry i of the list as a file. */}}
{{- define "runledger.requiredSecretPath" -}}
{{- printf "/etc/runledger/required/%d/%s" (int .index) .key -}}
{{- end -}}

{{/* The hook's --require-secret arguments, one per line, as YAML list items. */}}
{{- define "runledger.requireSecretArgs" -}}
{{- range $i, $s := fromJsonArray (include "runledger.existingSecrets" .) }}
- --require-secret
{{- if $s.env }}
- {{ printf "%s/%s=env:%s" $s.secret $s.key $s.env | quote }}
{{- else }}
- {{ printf "%s/%s=file:%s" $s.secret $s.key (include "runledger.requiredSecretPath" (dict "index" $i "key" $s.key)) | quote }}
{{- end }}
{{- end }}
{{- end -}}

{{/*
The hook's projected volume of the Secrets it reads as files, each
optional, or nothing when there are none.
*/}}
{{- define "runledger.requiredSecretsVolume" -}}
{{- $sources := list -}}
{{- range $i, $s := fromJsonArray (include "runledger.existingSecrets" .) }}
{{- if not $s.env }}
{{- $sources = append $sources (dict "secret" (dict "name" $s.secret "optional" true "items" (list (dict "key" $s.key "path" (printf "%d/%s" (int $i) $s.key))))) }}
{{- end }}
{{- end }}
{{- if $sources }}
- name: required-secrets
  projected:
    defaultMode: 0440
    sources:
      {{- toYaml $sources | nindent 6 }}
{{- end }}
{{- end -}}

{{/*
Fails the render when helm reaches a cluster and a Secret the values name,
or its key, is not in the release's namespace.
*/}}
{{- define "runledger.validateValues.existingSecrets" -}}
{{- $ns := .Release.Namespace -}}
{{- if lookup "v1" "ServiceAccount" $ns "default" -}}
{{- range fromJsonArray (include "runledger.existingSecrets" .) }}
{{- $found := lookup "v1" "Secret" $ns .secret }}
{{- if not $found }}
runledger: {{ .value }}
    Secret "{{ .secret }}" (named by {{ .value }}) does not exist in namespace
    "{{ $ns }}": pods that use it would wait in ContainerCreating. Create it
    first, e.g. kubectl -n {{ $ns }} create secret generic {{ .secret }} --from-literal={{ .key }}=...
{{- else if not (hasKey ($found.data | default dict) .key) }}
runledger: {{ .keyValue }}
    Secret "{{ .secret }}" in namespace "{{ $ns }}" has no key "{{ .key }}"
    ({{ .keyValue }}); its keys: {{ keys ($found.data | default dict) | sortAlpha | join ", " | default "none" }}.
{{- end }}
{{- end }}
{{- end -}}
{{- end -}}
