{{/*
The pod template of a long-running Runledger process (consumer or relay).
Called as (dict "ctx" $ "component" "consumer" "command" "consume"
"spec" .Values.consumer "env" (list of extra EnvVar)).
*/}}
{{- define "runledger.servicePod" -}}
{{- $ctx := .ctx -}}
{{- $spec := .spec -}}
metadata:
  labels:
    {{- include "runledger.componentLabels" (dict "ctx" $ctx "component" .component) | nindent 4 }}
    runledger.io/metrics: "true"
    {{- with $spec.podLabels }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
  annotations:
    {{- include "runledger.checksumAnnotations" $ctx | nindent 4 }}
    {{- with $spec.podAnnotations }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
spec:
  serviceAccountName: {{ include "runledger.serviceAccountName" $ctx }}
  automountServiceAccountToken: {{ $ctx.Values.serviceAccount.automountServiceAccountToken }}
  {{- with $ctx.Values.imagePullSecrets }}
  imagePullSecrets:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with $spec.priorityClassName }}
  priorityClassName: {{ . | quote }}
  {{- end }}
  securityContext:
    {{- toYaml $ctx.Values.podSecurityContext | nindent 4 }}
  terminationGracePeriodSeconds: {{ include "runledger.terminationGrace" (dict "ctx" $ctx "spec" $spec) }}
  containers:
    - name: {{ .component }}
      image: {{ include "runledger.image" $ctx | quote }}
      imagePullPolicy: {{ $ctx.Values.image.pullPolicy }}
      args:
        - {{ .command | quote }}
      securityContext:
        {{- toYaml $ctx.Values.containerSecurityContext | nindent 8 }}
      ports:
        - name: http-metrics
          containerPort: {{ $ctx.Values.config.httpPort | int }}
          protocol: TCP
      envFrom:
        {{- include "runledger.envFrom" $ctx | nindent 8 }}
      env:
        {{- include "runledger.env.database" (dict "ctx" $ctx "role" (ternary "relay" "worker" (eq .component "relay"))) | nindent 8 }}
        {{- with include "runledger.env.kafka" $ctx }}{{ . | trim | nindent 8 }}{{ end }}
        {{- if and (eq .component "consumer") (include "runledger.modelKeyEnabled" $ctx) }}
        # Only the consumer calls the model, so only it mounts the key.
        - name: MODEL_API_KEY_FILE
          value: {{ include "runledger.modelKeyPath" $ctx | quote }}
        {{- end }}
        {{- with .env }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
        {{- with include "runledger.env.extra" (dict "ctx" $ctx "extra" $spec.extraEnv) }}{{ . | trim | nindent 8 }}{{ end }}
      {{- if $spec.livenessProbe.enabled }}
      livenessProbe:
        {{- include "runledger.httpProbe" (dict "probe" $spec.livenessProbe "path" "/healthz") | nindent 8 }}
      {{- end }}
      {{- if $spec.readinessProbe.enabled }}
      readinessProbe:
        {{- include "runledger.httpProbe" (dict "probe" $spec.readinessProbe "path" "/readyz") | nindent 8 }}
      {{- end }}
      {{- if and $spec.startupProbe $spec.startupProbe.enabled }}
      startupProbe:
        {{- include "runledger.httpProbe" (dict "probe" $spec.startupProbe "path" "/healthz") | nindent 8 }}
      {{- end }}
      resources:
        {{- toYaml $spec.resources | nindent 8 }}
      volumeMounts:
        {{- include "runledger.volumeMounts" (dict "ctx" $ctx "db" true "model" (eq .component "consumer") "kafka" true) | nindent 8 }}
  volumes:
    {{- include "runledger.volumes" (dict "ctx" $ctx "db" true "model" (eq .component "consumer") "kafka" true) | nindent 4 }}
  {{- with $spec.nodeSelector }}
  nodeSelector:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- if $spec.affinity }}
  affinity:
    {{- toYaml $spec.affinity | nindent 4 }}
  {{- else if eq .component "consumer" }}
  affinity:
    podAntiAffinity:
      preferredDuringSchedulingIgnoredDuringExecution:
        - weight: 100
          podAffinityTerm:
            topologyKey: kubernetes.io/hostname
            labelSelector:
              matchLabels:
                {{- include "runledger.componentSelectorLabels" (dict "ctx" $ctx "component" .component) | nindent 16 }}
  {{- end }}
  {{- with $spec.tolerations }}
  tolerations:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with $spec.topologySpreadConstraints }}
  topologySpreadConstraints:
    {{- toYaml . | nindent 4 }}
  {{- end }}
{{- end }}
