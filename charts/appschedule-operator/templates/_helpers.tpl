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

{{/* The recommended labels, on every object, but for the component. */}}
{{- define "appschedule.commonLabels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/name: {{ include "appschedule.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: appschedule-operator
{{- end }}

{{/* The recommended labels of the operator's objects. The hook and test pods use commonLabels with a
component of their own, so the Services never select them. */}}
{{- define "appschedule.labels" -}}
{{ include "appschedule.commonLabels" . }}
app.kubernetes.io/component: operator
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
{{- /* never the namespace's default ServiceAccount: every pod there would get the operator's rights */}}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name }}
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
  verbs: [update]
# the AppScheduleCalendars AppSchedules name (spec.calendars): their blackouts, read only
- apiGroups: [appschedule.dev]
  resources: [appschedulecalendars]
  verbs: [get, list, watch]
# the pod templates AppSchedules name
- apiGroups: [apps]
  resources: [deployments]
  verbs: [get, list, watch]
# one CronJob per task, server-side applied
- apiGroups: [batch]
  resources: [cronjobs]
  verbs: [get, list, watch, create, patch, delete]
# the run ledger reads Jobs and removes its finalizer once a run is recorded; the operator starts the runs of
# backfills and catch-up (create) and deletes those of a backfill removed from its AppSchedule (delete)
- apiGroups: [batch]
  resources: [jobs]
  verbs: [list, watch, patch, create, delete]
# the pods of those Jobs, read only (the watch is filtered by the task label): what a run's claim came to (its
# container's termination message) and why it failed (OOMKilled, an exit code, Unschedulable, an image pull)
- apiGroups: [""]
  resources: [pods]
  verbs: [list, watch]
# Events on AppSchedules (MissedRun, DuplicateRun, ...)
- apiGroups: [""]
  resources: [events]
  verbs: [create]
{{- end }}

{{/* Cluster-scoped by nature: the validating webhook asks whether an AppSchedule's author may create Jobs. */}}
{{- define "appschedule.clusterRules" -}}
- apiGroups: [authorization.k8s.io]
  resources: [subjectaccessreviews]
  verbs: [create]
{{- end }}

{{/* The webhook's serving certificate made by Helm (without cert-manager), as JSON: the existing Secret's
(kept across upgrades), else a new CA and certificate. Made once per render and cached in .Values, so
the Secret, the caBundle and the Deployment's checksum all see the same one. */}}
{{- define "appschedule.webhookTLS" -}}
{{- if not (hasKey .Values "__webhookTLS") }}
{{- $fullname := include "appschedule.fullname" . }}
{{- $service := include "appschedule.webhookService" . }}
{{- $hosts := list (printf "%s.%s.svc" $service .Release.Namespace) (printf "%s.%s.svc.cluster.local" $service .Release.Namespace) }}
{{- $existing := lookup "v1" "Secret" .Release.Namespace (include "appschedule.webhookSecret" .) }}
{{- $tls := dict }}
{{- if and $existing (hasKey ($existing.data | default dict) "ca.crt") }}
{{- $tls = $existing.data }}
{{- else }}
{{- $ca := genCA (printf "%s-webhook-ca" $fullname) (int .Values.webhook.certificateDays) }}
{{- $cert := genSignedCert (first $hosts) nil $hosts (int .Values.webhook.certificateDays) $ca }}
{{- $tls = dict "tls.crt" ($cert.Cert | b64enc) "tls.key" ($cert.Key | b64enc) "ca.crt" ($ca.Cert | b64enc) }}
{{- end }}
{{- $_ := set .Values "__webhookTLS" $tls }}
{{- end }}
{{- toJson (index .Values "__webhookTLS") }}
{{- end }}
