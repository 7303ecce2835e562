{{/* Helpers of the lab's test chart; names and labels as the real chart computes them. */}}
{{- define "tensor-fusion.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* fullnameOverride, else nameOverride, else the release name. */}}
{{- define "tensor-fusion.fullname" -}}
{{- if .Values.fullnameOverride -}}{{ .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else -}}{{ default .Release.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}{{- end -}}
{{- end -}}

{{- define "tensor-fusion.namespace" -}}
{{- default .Release.Namespace .Values.namespaceOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* The real chart always renders <fullname>-controller; controller.deploymentName (lab only)
     renders another name, such as the product docs' <fullname>-controller-manager. */}}
{{- define "tensor-fusion.controllerName" -}}
{{- .Values.controller.deploymentName | default (printf "%s-controller" (include "tensor-fusion.fullname" .)) -}}
{{- end -}}

{{- define "tensor-fusion.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "tensor-fusion.labels" -}}
helm.sh/chart: {{ include "tensor-fusion.chart" . }}
{{- if .Chart.AppVersion }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
{{- end }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{/* The controller Service selects on these three; the Deployment's selector and Pods add
     tensor-fusion.ai/component: operator. */}}
{{- define "tensor-fusion.controller.selectorLabels" -}}
app.kubernetes.io/name: {{ include "tensor-fusion.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: controller
{{- end -}}

{{- define "tensor-fusion.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "tensor-fusion.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}
