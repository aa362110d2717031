{{/* Names and labels. */}}
{{- define "system1.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "system1.fullname" -}}
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

{{- define "system1.selectorLabels" -}}
app.kubernetes.io/name: {{ include "system1.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "system1.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "system1.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "system1.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "system1.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/*
Where the container finds its files: the ConfigMap's folder (read-only)
and the state folder (an emptyDir, writable).
*/}}
{{- define "system1.configDir" -}}/etc/system1{{- end }}
{{- define "system1.stateDir" -}}/var/lib/system1{{- end }}

{{/* The variable keys_env names, and the one decision_log.url_env names. */}}
{{- define "system1.keysEnv" -}}SYSTEM1_KEYS{{- end }}
{{- define "system1.decisionLogURLEnv" -}}SYSTEM1_DECISION_LOG_URL{{- end }}

{{/*
system1.offString: a setting whose values include "off", read from
Helm's values, where a bare off is YAML 1.1's false.
*/}}
{{- define "system1.offString" -}}
{{- if kindIs "bool" . }}{{ if . }}on{{ else }}off{{ end }}{{ else }}{{ . }}{{ end }}
{{- end }}

{{/*
system1.seconds: a Go duration ("30s", "1m30s", "2.5s", "500ms") as whole
seconds, rounded up; "" and "0" are 0. Called with (list VALUE KEY), it
fails the render naming KEY when VALUE is anything else.
*/}}
{{- define "system1.seconds" -}}
{{- $d := index . 0 | toString | trimPrefix "+" }}
{{- $unit := "(ns|us|µs|μs|ms|s|m|h)" }}
{{- $num := "([0-9]+(\\.[0-9]*)?|\\.[0-9]+)" }}
{{- if or (eq $d "") (eq $d "0") }}0
{{- else }}
{{- if not (regexMatch (printf "^(%s%s)+$" $num $unit) $d) }}
{{- fail (printf "%s: %q is not a duration such as 30s or 1m30s" (index . 1) $d) }}
{{- end }}
{{- $per := dict "ns" 0.000000001 "us" 0.000001 "µs" 0.000001 "μs" 0.000001 "ms" 0.001 "s" 1.0 "m" 60.0 "h" 3600.0 }}
{{- $total := 0.0 }}
{{- range regexFindAll (printf "%s%s" $num $unit) $d -1 }}
{{- $n := regexFind (printf "^%s" $num) . }}
{{- $u := trimPrefix $n . }}
{{- $total = addf $total (mulf (float64 $n) (get $per $u)) }}
{{- end }}
{{- ceil $total | int }}
{{- end }}
{{- end }}

{{/* The drain in seconds: config.timeouts.drain, else system1's default, 30s. */}}
{{- define "system1.drainSeconds" -}}
{{- $d := dig "timeouts" "drain" "" .Values.config }}
{{- $s := include "system1.seconds" (list $d "config.timeouts.drain") | int }}
{{- if eq $s 0 }}30{{ else }}{{ $s }}{{ end }}
{{- end }}

{{/* The drain's delay in seconds: config.timeouts.drain_delay, else system1's default, 0. */}}
{{- define "system1.drainDelaySeconds" -}}
{{- $d := dig "timeouts" "drain_delay" "" .Values.config }}
{{- include "system1.seconds" (list $d "config.timeouts.drain_delay") }}
{{- end }}

{{/*
system1.offKey: a section of the configuration (a map, or nothing), with
its key off as written: Helm reads values as YAML 1.1, where a bare off
as a key is false.
*/}}
{{- define "system1.offKey" -}}
{{- $m := deepCopy (default dict .) }}
{{- if hasKey $m "false" }}
{{- $_ := set $m "off" (get $m "false") }}
{{- $_ := unset $m "false" }}
{{- end }}
{{- toYaml $m }}
{{- end }}

{{/* system1.decisionLog: config.decision_log, with its key off as written. */}}
{{- define "system1.decisionLog" -}}
{{- include "system1.offKey" .Values.config.decision_log }}
{{- end }}

{{/*
system1.nodes: config.nodes without the chart's own keySecret.
*/}}
{{- define "system1.nodes" -}}
{{- $out := list }}
{{- range .Values.config.nodes }}
{{- $out = append $out (omit . "keySecret") }}
{{- end }}
{{- toYaml $out }}
{{- end }}

{{/*
system1.config: the configuration file, from config with the keys the
chart owns set. Every refusal names the value to change.
*/}}
{{- define "system1.config" -}}
{{- $v := .Values }}
{{- $c := deepCopy (default dict $v.config) }}
{{- range $k := list "listen" "keys" "keys_env" "tls" "providers" }}
{{- if hasKey $c $k }}
{{- fail (printf "config.%s: set by the chart or not supported in it (listen comes from containerPort, keys from auth.existingSecret; TLS ends at the Service or an ingress; write nodes and gateway.chain instead of providers)" $k) }}
{{- end }}
{{- end }}
{{- $dl := include "system1.decisionLog" . | fromYaml }}
{{- if hasKey $dl "url" }}
{{- fail "config.decision_log.url: a PostgreSQL URL may hold a password and does not go in a ConfigMap; put it in a Secret and name it in postgres.urlSecret" }}
{{- end }}
{{- if hasKey $dl "url_env" }}
{{- fail "config.decision_log.url_env: set by the chart from postgres.urlSecret" }}
{{- end }}
{{- if $v.postgres.urlSecret.name }}
{{- if $dl.off }}
{{- fail "postgres.urlSecret and config.decision_log.off exclude each other" }}
{{- end }}
{{- if $dl.path }}
{{- fail "postgres.urlSecret and config.decision_log.path exclude each other: the URL is PostgreSQL instead of the SQLite file" }}
{{- end }}
{{- $_ := set $dl "url_env" (include "system1.decisionLogURLEnv" .) }}
{{- end }}
{{- $state := include "system1.stateDir" . }}
{{- with $dl.path }}
{{- if and (hasPrefix "/" (toString .)) (not (hasPrefix (printf "%s/" $state) (toString .))) }}
{{- fail (printf "config.decision_log.path: %s is outside the state folder %s, on the pod's read-only root; give a name in the state folder (a relative one is there), or leave it out" (toString .) $state) }}
{{- end }}
{{- end }}
{{- if $dl }}{{ $_ := set $c "decision_log" $dl }}{{ end }}
{{- if kindIs "map" (get $c "fingerprint") }}
{{- $_ := set $c "fingerprint" (include "system1.offKey" (get $c "fingerprint") | fromYaml) }}
{{- with (get (get $c "fingerprint") "builds") }}
{{- if not (hasPrefix (printf "%s/" $state) (toString .)) }}
{{- fail (printf "config.fingerprint.builds: %s is not in the state folder %s, the pod's one writable folder (a relative name is beside the read-only configuration); write %s/builds.json, or leave it out" (toString .) $state $state) }}
{{- end }}
{{- end }}
{{- end }}
{{- if not $c.nodes }}
{{- fail "config.nodes: none configured; system1 would refuse to start (every request would fail): add a node" }}
{{- end }}
{{- $_ := set $c "nodes" (include "system1.nodes" . | fromYamlArray) }}
{{- $_ := set $c "listen" (printf "0.0.0.0:%d" (int $v.containerPort)) }}
{{- if $v.auth.disabled }}
{{- if $v.auth.existingSecret }}
{{- fail "auth.disabled and auth.existingSecret exclude each other: empty existingSecret to serve without keys" }}
{{- end }}
{{- else }}
{{- if not $v.auth.existingSecret }}
{{- fail "auth.existingSecret: name the Secret of the callers' keys, or set auth.disabled: true to serve without keys" }}
{{- end }}
{{- $_ := set $c "keys_env" (include "system1.keysEnv" .) }}
{{- end }}
{{- range $k := list "calibration" "debias" "prior" }}
{{- if and (hasKey $c $k) (not (kindIs "map" (get $c $k))) }}
{{- $_ := set $c $k (include "system1.offString" (get $c $k)) }}
{{- end }}
{{- end }}
{{- $cal := dict }}
{{- if kindIs "map" (get $c "calibration") }}
{{- $cal = get $c "calibration" }}
{{- if hasKey $cal "mode" }}{{ $_ := set $cal "mode" (include "system1.offString" $cal.mode) }}{{ end }}
{{- else if hasKey $c "calibration" }}
{{- $cal = dict "mode" (get $c "calibration") }}
{{- end }}
{{- $refit := ne (include "system1.seconds" (list (default "" $cal.refit_every) "config.calibration.refit_every")) "0" }}
{{- if hasKey (default dict $c.gateway) "fits" }}
{{- fail "config.gateway.fits: set by the chart; give the fits file's content in fits, or calibration.refit_every to fit from the decision log" }}
{{- end }}
{{- if and $v.fits $refit }}
{{- fail "fits and config.calibration.refit_every exclude each other in this chart: the ConfigMap is read-only, and refits start an empty fits file in the state folder" }}
{{- end }}
{{- if and $v.fits (ne (toString $cal.mode) "apply") }}
{{- fail "fits: a fits file is served only with config.calibration: apply (or its mode: apply); set it, or leave fits out" }}
{{- end }}
{{- if eq (toString $cal.mode) "apply" }}
{{- $gw := deepCopy (default dict $c.gateway) }}
{{- if $refit }}
{{- $_ := set $gw "fits" (printf "%s/fits.json" (include "system1.stateDir" .)) }}
{{- else if $v.fits }}
{{- $_ := set $gw "fits" (printf "%s/fits.json" (include "system1.configDir" .)) }}
{{- /* serve keeps its builds file beside the fits unless told where: not in the read-only ConfigMap's folder */}}
{{- $fp := default dict (get $c "fingerprint") }}
{{- if and (kindIs "map" $fp) (not (or (get $fp "off") (get $fp "builds"))) }}
{{- $_ := set $fp "builds" (printf "%s/builds.json" (include "system1.stateDir" .)) }}
{{- $_ := set $c "fingerprint" $fp }}
{{- end }}
{{- else }}
{{- fail "config.calibration is apply: give the fits file's content in fits, or calibration.refit_every to fit from the decision log" }}
{{- end }}
{{- $_ := set $c "gateway" $gw }}
{{- end }}
{{- toYaml $c }}
{{- end }}

{{/*
system1.env: the variables the container reads.
*/}}
{{- define "system1.env" -}}
{{- $v := .Values }}
{{- $env := list }}
{{- if not $v.auth.disabled }}
{{- $env = append $env (dict "name" (include "system1.keysEnv" .) "valueFrom" (dict "secretKeyRef" (dict "name" $v.auth.existingSecret "key" $v.auth.secretKey))) }}
{{- end }}
{{- if $v.postgres.urlSecret.name }}
{{- $env = append $env (dict "name" (include "system1.decisionLogURLEnv" .) "valueFrom" (dict "secretKeyRef" (dict "name" $v.postgres.urlSecret.name "key" $v.postgres.urlSecret.key))) }}
{{- end }}
{{- $extra := dict }}
{{- range $v.extraEnv }}{{ $_ := set $extra .name true }}{{ end }}
{{- range $i, $n := $v.config.nodes }}
{{- if $n.keySecret }}
{{- if not $n.key_env }}
{{- fail (printf "config.nodes[%d] (%s): keySecret needs key_env, the variable it fills" $i $n.name) }}
{{- end }}
{{- if not (and $n.keySecret.name $n.keySecret.key) }}
{{- fail (printf "config.nodes[%d] (%s): keySecret needs a name and a key" $i $n.name) }}
{{- end }}
{{- $env = append $env (dict "name" $n.key_env "valueFrom" (dict "secretKeyRef" (dict "name" $n.keySecret.name "key" $n.keySecret.key))) }}
{{- else if and $n.key_env (not (hasKey $extra $n.key_env)) }}
{{- fail (printf "config.nodes[%d] (%s): key_env %s is set from nowhere: give keySecret: {name, key} beside it, or the variable in extraEnv" $i $n.name $n.key_env) }}
{{- end }}
{{- end }}
{{- $tracing := get (default dict $v.config) "tracing" }}
{{- if kindIs "map" $tracing }}
{{- with get $tracing "headers_env" }}
{{- if not (hasKey $extra (toString .)) }}
{{- fail (printf "config.tracing.headers_env: %s is set from nowhere: give the variable in extraEnv, from a Secret (valueFrom.secretKeyRef)" (toString .)) }}
{{- end }}
{{- end }}
{{- end }}
{{- $seen := dict }}
{{- range (concat $env $v.extraEnv) }}
{{- if hasKey $seen .name }}
{{- fail (printf "the variable %s is set twice (a node's keySecret, auth, postgres or extraEnv)" .name) }}
{{- end }}
{{- $_ := set $seen .name true }}
{{- end }}
{{- toYaml (concat $env $v.extraEnv) }}
{{- end }}

{{/*
system1.affinity: affinity, with the anti-affinity podAntiAffinity asks
for (one replica per node, preferred or required) unless affinity gives
its own.
*/}}
{{- define "system1.affinity" -}}
{{- $a := deepCopy (default dict .Values.affinity) }}
{{- $term := dict "topologyKey" "kubernetes.io/hostname" "labelSelector" (dict "matchLabels" (include "system1.selectorLabels" . | fromYaml)) }}
{{- if hasKey $a "podAntiAffinity" }}
{{- else if eq .Values.podAntiAffinity "soft" }}
{{- $_ := set $a "podAntiAffinity" (dict "preferredDuringSchedulingIgnoredDuringExecution" (list (dict "weight" 100 "podAffinityTerm" $term))) }}
{{- else if eq .Values.podAntiAffinity "hard" }}
{{- $_ := set $a "podAntiAffinity" (dict "requiredDuringSchedulingIgnoredDuringExecution" (list $term)) }}
{{- end }}
{{- if $a }}{{ toYaml $a }}{{ end }}
{{- end }}

{{/* The replicas the chart may run at once: for the guards. */}}
{{- define "system1.maxReplicas" -}}
{{- if .Values.autoscaling.enabled }}{{ .Values.autoscaling.maxReplicas | int }}{{ else }}{{ .Values.replicaCount | int }}{{ end }}
{{- end }}

{{/* The guards over several values at once; included by the Deployment. */}}
{{- define "system1.guards" -}}
{{- $v := .Values }}
{{- $dl := include "system1.decisionLog" . | fromYaml }}
{{- if and (gt (include "system1.maxReplicas" . | int) 1) (not $v.postgres.urlSecret.name) (not $dl.off) }}
{{- fail (printf "%s replicas would each keep their own SQLite decision log in an emptyDir, lost with the pod: name a Secret with a postgres:// URL in postgres.urlSecret (shared by all), or set config.decision_log.off" (include "system1.maxReplicas" .)) }}
{{- end }}
{{- if $v.autoscaling.enabled }}
{{- if gt (int $v.autoscaling.minReplicas) (int $v.autoscaling.maxReplicas) }}
{{- fail (printf "autoscaling: minReplicas %d is over maxReplicas %d" (int $v.autoscaling.minReplicas) (int $v.autoscaling.maxReplicas)) }}
{{- end }}
{{- if and $v.autoscaling.targetCPUUtilizationPercentage (not (dig "requests" "cpu" "" (default dict $v.resources))) }}
{{- fail "autoscaling.targetCPUUtilizationPercentage needs resources.requests.cpu: utilization is a share of the request" }}
{{- end }}
{{- end }}
{{- if $v.podDisruptionBudget.enabled }}
{{- $pdb := $v.podDisruptionBudget }}
{{- if not (or (kindIs "invalid" $pdb.minAvailable) (kindIs "invalid" $pdb.maxUnavailable)) }}
{{- fail "podDisruptionBudget: give at most one of minAvailable and maxUnavailable" }}
{{- end }}
{{- $least := ternary (int $v.autoscaling.minReplicas) (int $v.replicaCount) $v.autoscaling.enabled }}
{{- if not (kindIs "invalid" $pdb.minAvailable) }}
{{- $min := toString $pdb.minAvailable }}
{{- /* the pods it keeps: a share is of the replicas, rounded up, as the disruption controller reads it */}}
{{- $kept := 0 }}
{{- if hasSuffix "%" $min }}
{{- $kept = ceil (divf (mulf (float64 (trimSuffix "%" $min)) $least) 100.0) | int }}
{{- else }}
{{- $kept = int $min }}
{{- end }}
{{- if ge $kept $least }}
{{- fail (printf "podDisruptionBudget.minAvailable %s with %d replicas: no pod could ever be evicted, so node drains would hang; lower it or use maxUnavailable" $min $least) }}
{{- end }}
{{- end }}
{{- end }}
{{- end }}
