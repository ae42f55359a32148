#!/bin/sh
# CoworkEnv training job for Kubernetes (the `command` backend). Template:
#   deploy/kubernetes/submit.sh {job_id} {config_url} {callback_secret}
# Stores the secret in a Secret and applies deploy/kubernetes/job.yaml with the job's id.
set -eu
JOB_ID="$1"; CONFIG_URL="$2"; SECRET="$3"
NAMESPACE="${COWORKENV_K8S_NAMESPACE:-default}"
HERE=$(dirname "$0")

kubectl -n "$NAMESPACE" create secret generic "coworkenv-training-$JOB_ID" \
  --from-literal=secret="$SECRET" --dry-run=client -o yaml | kubectl -n "$NAMESPACE" apply -f -
sed -e "s|__JOB_ID__|$JOB_ID|g" -e "s|__CONFIG_URL__|$CONFIG_URL|g" \
  -e "s|__IMAGE__|${COWORKENV_TRAIN_IMAGE:-coworkenv-train:latest}|g" \
  "$HERE/job.yaml" | kubectl -n "$NAMESPACE" apply -f -
echo "coworkenv-training-$JOB_ID"
