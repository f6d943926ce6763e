{{/* The chart's name, or nameOverride. */}}
{{- define "gpufleet.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The prefix of every object's name: RELEASE-gpufleet, RELEASE if it holds the chart's
name already, or fullnameOverride. 63 characters at most (DNS label). */}}
{{- define "gpufleet.fullname" -}}
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

{{- define "gpufleet.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Labels on every object. */}}
{{- define "gpufleet.labels" -}}
helm.sh/chart: {{ include "gpufleet.chart" . }}
{{ include "gpufleet.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/component: scheduler
{{- end }}

{{/* Labels that select the scheduler's pods (immutable in a Deployment: keep them few). */}}
{{- define "gpufleet.selectorLabels" -}}
app.kubernetes.io/name: {{ include "gpufleet.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "gpufleet.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "gpufleet.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "gpufleet.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}

{{/* The SchedulerConfiguration file that --config reads. */}}
{{- define "gpufleet.config" -}}
apiVersion: gpufleet.io/v1alpha1
kind: SchedulerConfiguration
{{- with .Values.config }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/* The Lease: leaderElection.resourceName, with "-dry-run" for a shadow (extraArgs has
--dry-run), so that a shadow installed beside gpufleet never takes the scheduler's Lease. */}}
{{- define "gpufleet.leaseName" -}}
{{- if has "--dry-run" .Values.extraArgs -}}
{{- printf "%s-dry-run" .Values.leaderElection.resourceName -}}
{{- else -}}
{{- .Values.leaderElection.resourceName -}}
{{- end -}}
{{- end }}
