{{/* Names and labels. */}}
{{- define "casewatch.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "casewatch.fullname" -}}
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

{{- define "casewatch.selectorLabels" -}}
app.kubernetes.io/name: {{ include "casewatch.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/* The daemon's pods (the migration Job's pods share the selector labels, not the component:
  the Service, the PDB and the Deployment must not count them). */}}
{{- define "casewatch.daemonSelectorLabels" -}}
{{ include "casewatch.selectorLabels" . }}
app.kubernetes.io/component: daemon
{{- end }}

{{- define "casewatch.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "casewatch.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: casewatch
{{- end }}

{{- define "casewatch.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "casewatch.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "casewatch.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}

{{/* Where the ConfigMap's casewatch.yaml is mounted, and the daemon's arguments. */}}
{{- define "casewatch.configDir" -}}/etc/casewatch{{- end }}
{{- define "casewatch.configPath" -}}{{ include "casewatch.configDir" . }}/casewatch.yaml{{- end }}

{{- define "casewatch.port" -}}
{{- $server := .Values.config.server | default dict }}
{{- $server.port | default 9464 | int }}
{{- end }}

{{/* The casewatch YAML config: values' `config` with the listen address the pod needs. */}}
{{- define "casewatch.config" -}}
{{- $config := deepCopy .Values.config }}
{{- $server := dict "host" "0.0.0.0" "port" (include "casewatch.port" . | int) }}
{{- $_ := set $config "server" (mergeOverwrite (deepCopy ($config.server | default dict)) $server) }}
{{- toYaml $config }}
{{- end }}

{{/* daemon.drain_timeout_seconds (the settings default is 30), rounded up. */}}
{{- define "casewatch.drainSeconds" -}}
{{- $daemon := .Values.config.daemon | default dict }}
{{- $drain := 30.0 }}
{{- if hasKey $daemon "drain_timeout_seconds" }}{{ $drain = $daemon.drain_timeout_seconds }}{{ end }}
{{- ceil $drain | int }}
{{- end }}

{{/* The pod's grace period: at least drain + 30 s (the daemon's worst-case stop). */}}
{{- define "casewatch.gracePeriod" -}}
{{- $minimum := add (include "casewatch.drainSeconds" . | int) 30 }}
{{- $set := .Values.terminationGracePeriodSeconds }}
{{- if kindIs "invalid" $set }}
{{- $minimum }}
{{- else if lt (int $set) $minimum }}
{{- fail (printf "terminationGracePeriodSeconds=%d is less than config.daemon.drain_timeout_seconds + 30 = %d: a stopping pod would be killed before it drains and commits; raise it or leave it null" (int $set) $minimum) }}
{{- else }}
{{- int $set }}
{{- end }}
{{- end }}

{{/* Whether the judge keys, SASL password and database URL come from a Secret. */}}
{{- define "casewatch.secretName" -}}
{{- $s := .Values.secrets }}
{{- if and (not $s.existingSecret) (or $s.judgeApiKeys $s.kafkaSaslPasswordKey $s.storageUrlKey $s.redactionKeyKey) }}
{{- fail "secrets.existingSecret: name the Secret that holds the keys listed in secrets.judgeApiKeys / kafkaSaslPasswordKey / storageUrlKey / redactionKeyKey" }}
{{- end }}
{{- $s.existingSecret }}
{{- end }}

{{/* Fail-fast checks across values that a JSON schema cannot express. */}}
{{- define "casewatch.validate" -}}
{{- $secretName := include "casewatch.secretName" . }}
{{- range $name, $judge := (.Values.config.judges | default dict) }}
{{- if and $judge.api_key_env (not (hasKey $.Values.secrets.judgeApiKeys $judge.api_key_env)) }}
{{- fail (printf "config.judges.%s.api_key_env is %s: add secrets.judgeApiKeys.%s (the key of that API key in secrets.existingSecret)" $name $judge.api_key_env $judge.api_key_env) }}
{{- end }}
{{- end }}
{{- $storage := .Values.config.storage | default dict }}
{{- if and (gt (int .Values.replicaCount) 1) (include "casewatch.sqlite" .) }}
{{- fail (printf "replicaCount=%d with a SQLite storage.url: each pod would keep its own database and every replica would run the scheduled jobs; use PostgreSQL (config.storage.url or secrets.storageUrlKey)" (int .Values.replicaCount)) }}
{{- end }}
{{- $kafka := .Values.config.kafka | default dict }}
{{- if $kafka.group_instance_id }}
{{- fail "config.kafka.group_instance_id: every replica would join under that one name and the broker would fence all but one; set staticMembership.enabled: true (each pod joins under its pod name)" }}
{{- end }}
{{- if and (hasPrefix "SASL" ($kafka.security_protocol | default "")) (not .Values.secrets.kafkaSaslPasswordKey) }}
{{- fail "config.kafka.security_protocol is SASL: set secrets.kafkaSaslPasswordKey (the key of the SASL password in secrets.existingSecret)" }}
{{- end }}
{{- end }}

{{/* "true" when the database is a SQLite file (it then lives in the pod's emptyDir). */}}
{{- define "casewatch.sqlite" -}}
{{- $storage := .Values.config.storage | default dict }}
{{- if and (not .Values.secrets.storageUrlKey) (hasPrefix "sqlite" ($storage.url | default "sqlite:///casewatch.db")) }}true{{ end }}
{{- end }}

{{/* Environment of the daemon and the migration Job: secrets by reference only. */}}
{{- define "casewatch.env" -}}
{{- $secretName := include "casewatch.secretName" . }}
- name: PYTHONUNBUFFERED
  value: "1"
{{- range $env, $key := .Values.secrets.judgeApiKeys }}
- name: {{ $env }}
  valueFrom:
    secretKeyRef:
      name: {{ $secretName }}
      key: {{ $key }}
{{- end }}
{{- if .Values.staticMembership.enabled }}
- name: CASEWATCH_KAFKA__GROUP_INSTANCE_ID
  valueFrom:
    fieldRef:
      fieldPath: metadata.name
{{- end }}
{{- with .Values.secrets.kafkaSaslPasswordKey }}
- name: CASEWATCH_KAFKA__SASL_PASSWORD
  valueFrom:
    secretKeyRef:
      name: {{ $secretName }}
      key: {{ . }}
{{- end }}
{{- with .Values.secrets.storageUrlKey }}
- name: CASEWATCH_STORAGE__URL
  valueFrom:
    secretKeyRef:
      name: {{ $secretName }}
      key: {{ . }}
{{- end }}
{{- with .Values.secrets.redactionKeyKey }}
- name: CASEWATCH_REDACTION__KEY
  valueFrom:
    secretKeyRef:
      name: {{ $secretName }}
      key: {{ . }}
{{- end }}
{{- with .Values.extraEnv }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/* `auto` | true | false against the cluster's monitoring.coreos.com/v1 API. */}}
{{- define "casewatch.monitoringEnabled" -}}
{{- $enabled := index . 0 }}
{{- $ctx := index . 1 }}
{{- $kind := index . 2 }}
{{- if eq (toString $enabled) "true" }}true
{{- else if and (eq (toString $enabled) "auto") ($ctx.Capabilities.APIVersions.Has (printf "monitoring.coreos.com/v1/%s" $kind)) }}true
{{- end }}
{{- end }}
