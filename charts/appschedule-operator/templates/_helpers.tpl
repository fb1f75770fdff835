{{/* The chart's name, shortened to a DNS label. */}}
{{- define "appschedule.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The prefix of every object's name: "<release>-<chart>", or the release alone when it holds the chart name. */}}
{{- define "appschedule.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 52 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 52 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 52 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{/* The recommended labels, on every object. */}}
{{- define "appschedule.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "appschedule.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: appschedule-operator
{{- end }}

{{/* The labels that select the operator's pod. */}}
{{- define "appschedule.selectorLabels" -}}
app.kubernetes.io/name: {{ include "appschedule.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: operator
{{- end }}

{{- define "appschedule.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "appschedule.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "appschedule.image" -}}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}
{{- end }}

{{- define "appschedule.webhookService" -}}
{{- printf "%s-webhook" (include "appschedule.fullname" .) }}
{{- end }}

{{- define "appschedule.webhookSecret" -}}
{{- printf "%s-webhook-tls" (include "appschedule.fullname" .) }}
{{- end }}

{{- define "appschedule.metricsService" -}}
{{- printf "%s-metrics" (include "appschedule.fullname" .) }}
{{- end }}

{{/* The namespaces the webhooks see: only the watched ones when watchNamespaces is set. */}}
{{- define "appschedule.namespaceSelector" -}}
{{- if .Values.watchNamespaces }}
namespaceSelector:
  matchExpressions:
  - key: kubernetes.io/metadata.name
    operator: In
    values:
    {{- range .Values.watchNamespaces }}
    - {{ . | quote }}
    {{- end }}
{{- end }}
{{- end }}

{{/* What the operator may do with the objects it manages, in a ClusterRole or in each watched namespace's Role. */}}
{{- define "appschedule.rules" -}}
# read AppSchedules from the watch, write their status
- apiGroups: [appschedule.dev]
  resources: [appschedules]
  verbs: [get, list, watch]
- apiGroups: [appschedule.dev]
  resources: [appschedules/status]
  verbs: [get, update, patch]
# the pod templates AppSchedules name
- apiGroups: [apps]
  resources: [deployments]
  verbs: [get, list, watch]
# one CronJob per task, server-side applied
- apiGroups: [batch]
  resources: [cronjobs]
  verbs: [get, list, watch, create, update, patch, delete]
# the run ledger reads Jobs and removes its finalizer once a run is recorded
- apiGroups: [batch]
  resources: [jobs]
  verbs: [get, list, watch, patch]
# Events on AppSchedules (MissedRun, DuplicateRun, ...)
- apiGroups: [""]
  resources: [events]
  verbs: [create, patch]
{{- end }}

{{/* Cluster-scoped by nature: the validating webhook asks whether an AppSchedule's author may create Jobs. */}}
{{- define "appschedule.clusterRules" -}}
- apiGroups: [authorization.k8s.io]
  resources: [subjectaccessreviews]
  verbs: [create]
{{- end }}
