{{/* The name of every object: the release name, as deploy/kubernetes names them "weir". */}}
{{- define "weir.fullname" -}}
{{- .Release.Name | trunc 52 | trimSuffix "-" -}}
{{- end -}}

{{/* The selector of the pods: the same label deploy/kubernetes selects by. */}}
{{- define "weir.selector" -}}
app.kubernetes.io/name: {{ include "weir.fullname" . }}
{{- end -}}

{{/* Labels of every object: the selector, kustomization.yaml's part-of, and Helm's own. */}}
{{- define "weir.labels" -}}
{{ include "weir.selector" . }}
app.kubernetes.io/part-of: weir
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{/* The Secret holding the cluster secret. */}}
{{- define "weir.secretName" -}}
{{- .Values.clusterSecret.existingSecret | default (printf "%s-cluster-secret" (include "weir.fullname" .)) -}}
{{- end -}}
