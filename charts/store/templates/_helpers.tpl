{{/* Names and labels shared by the chart's templates. */}}
{{- define "store.fullname" -}}
{{- printf "%s-operator" .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "store.labels" -}}
app.kubernetes.io/name: store-operator
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: kvcache-store
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "store.selectorLabels" -}}
app.kubernetes.io/name: store-operator
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "store.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{- define "store.webhookService" -}}
{{- printf "%s-webhook" (include "store.fullname" .) -}}
{{- end -}}

{{- define "store.webhookSecret" -}}
{{- printf "%s-webhook-tls" (include "store.fullname" .) -}}
{{- end -}}
