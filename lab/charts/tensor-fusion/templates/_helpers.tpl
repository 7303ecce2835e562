{{- define "tensor-fusion.fullname" -}}
{{- if .Values.fullnameOverride -}}{{ .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else if .Values.nameOverride -}}{{ .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- else -}}{{ .Release.Name | trunc 63 | trimSuffix "-" }}{{- end -}}
{{- end -}}

{{- define "tensor-fusion.namespace" -}}
{{ .Values.namespaceOverride | default .Release.Namespace }}
{{- end -}}

{{- define "tensor-fusion.controllerName" -}}
{{ .Values.controller.deploymentName | default (printf "%s-controller-manager" (include "tensor-fusion.fullname" .)) }}
{{- end -}}

{{- define "tensor-fusion.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{- define "tensor-fusion.controllerSelector" -}}
app.kubernetes.io/name: tensor-fusion
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: controller
tensor-fusion.ai/component: operator
{{- end -}}
