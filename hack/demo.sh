#!/usr/bin/env bash
# `make run`: the operator with a live demo. Uses the current kubeconfig when it reaches a cluster,
# otherwise (or with APPSCHEDULE_LOCAL=1) starts the local cluster (hack/cluster); installs the CRD, applies examples/ and runs the
# operator in the foreground (Ctrl-C stops it; `make cluster-down` stops a local cluster).
set -euo pipefail
cd "$(dirname "$0")/.."
KUBECTL=.tools/bin/kubectl

WEBHOOKS=()
if [ "${APPSCHEDULE_LOCAL:-}" != 1 ] && { [ -n "${KUBECONFIG:-}" ] || [ -f "$HOME/.kube/config" ]; }; then
  if "$KUBECTL" version --request-timeout=5s >/dev/null 2>&1; then
    echo "using the cluster of the current kubeconfig, context $("$KUBECTL" config current-context)" \
      "(APPSCHEDULE_LOCAL=1 make run starts a local one instead)"
  else
    echo "the current kubeconfig reaches no cluster; APPSCHEDULE_LOCAL=1 make run uses a local one" >&2
    exit 1
  fi
else
  .venv/bin/python hack/cluster/localcluster.py up
  eval "$(python3 hack/cluster/localcluster.py env)"
  # the local API server runs on this machine: it can call the webhooks on loopback (a remote one
  # cannot; there the Jobs run without their key until the chart installs the operator in the cluster)
  WEBHOOKS=(--webhook-port "${WEBHOOK_PORT:-9443}")
fi

"$KUBECTL" apply --server-side -f crds/appschedule.dev_appschedules.yaml -f crds/appschedule.dev_appschedulecalendars.yaml
# a CRD just created has no status.conditions yet, which makes `kubectl wait` fail at once: retry (60 s)
CRDS=(crd/appschedules.appschedule.dev crd/appschedulecalendars.appschedule.dev)
for _ in $(seq 60); do
  "$KUBECTL" wait --for=condition=Established --timeout=5s "${CRDS[@]}" >/dev/null 2>&1 && break
  sleep 1
done
"$KUBECTL" wait --for=condition=Established --timeout=5s "${CRDS[@]}"
"$KUBECTL" create namespace shop --dry-run=client -o yaml | "$KUBECTL" apply -f -
"$KUBECTL" apply -f examples/deployment.yaml -f examples/appschedule.yaml

cat <<MSG

The operator runs below (Ctrl-C stops it). In another terminal:
  export KUBECONFIG=${KUBECONFIG:-$HOME/.kube/config} PATH=$PWD/.tools/bin:$PWD/.venv/bin:\$PATH
  kubectl get appschedules -A           # -o wide for image and reason
  kubectl appschedule ui -n shop        # the page of runs, live, on 127.0.0.1:8384 (it prints the address)
  kubectl get cronjobs -n shop
  kubectl describe appschedule -n shop shop   # the run ledger: counts, recent runs, Events
  curl -s localhost:${METRICS_PORT:-8000}/metrics | grep ^appschedule_

MSG
exec .venv/bin/appschedule run --log-format "${LOG_FORMAT:-plain}" --metrics-port "${METRICS_PORT:-8000}" "${WEBHOOKS[@]}"
