#!/bin/sh
# Creates the namespace and registers drctl's search attributes (drctl/models/search_attributes.py)
# in $TEMPORAL_NAMESPACE.
# Idempotent and loud: an attribute already registered as Keyword is fine; anything else (another
# type, a missing namespace, a server that never answers) fails this one-shot service, and the
# worker, which waits for its success, does not start on a namespace where every task would fail.
set -eu
: "${TEMPORAL_ADDRESS:?TEMPORAL_ADDRESS must name the Temporal frontend (deploy/compose/temporal.env)}"
NS=${TEMPORAL_NAMESPACE:-default}
ATTEMPTS=${TEMPORAL_HEALTH_ATTEMPTS:-30}
PAUSE=${TEMPORAL_HEALTH_PAUSE_S:-2}
NAMES="DrctlFleet DrctlOperation DrctlPhase DrctlSourceRegion DrctlTargetRegion DrctlVerdict DrctlInitiator"

# `retry WHAT CMD...`: run CMD until it succeeds, at most $ATTEMPTS times; fail naming WHAT.
retry() {
  what=$1
  shift
  attempt=1
  until "$@" >/dev/null 2>&1; do
    if [ "$attempt" -ge "$ATTEMPTS" ]; then
      echo "$what after $ATTEMPTS attempts" >&2
      exit 1
    fi
    attempt=$((attempt + 1))
    sleep "$PAUSE"
  done
}

retry "Temporal at $TEMPORAL_ADDRESS is not healthy" temporal operator cluster health --address "$TEMPORAL_ADDRESS"

# temporalio/server creates no namespace (auto-setup did): create it once, with a week's retention.
if ! temporal operator namespace describe --address "$TEMPORAL_ADDRESS" --namespace "$NS" >/dev/null 2>&1; then
  temporal operator namespace create --address "$TEMPORAL_ADDRESS" --namespace "$NS" --retention 7d
  echo "namespace $NS created"
fi
# A new namespace reaches the frontend's cache within seconds: wait until it answers for it.
retry "namespace $NS does not answer" \
  temporal operator search-attribute list --address "$TEMPORAL_ADDRESS" --namespace "$NS"

for name in $NAMES; do
  if out=$(temporal operator search-attribute create --address "$TEMPORAL_ADDRESS" --namespace "$NS" \
      --name "$name" --type Keyword 2>&1); then
    echo "$name: registered as Keyword in $NS"
  elif echo "$out" | grep -q "already exists" && ! echo "$out" | grep -q "different type"; then
    echo "$name: already registered in $NS"  # older CLIs report a same-type attribute as an error
  else
    echo "$name: cannot register in namespace $NS: $out" >&2
    exit 1
  fi
done

# Read back what the worker's /readyz checks: each one present, as Keyword.
listed=$(temporal operator search-attribute list --address "$TEMPORAL_ADDRESS" --namespace "$NS" -o json)
for name in $NAMES; do
  if ! echo "$listed" | grep -q "\"$name\": *\"INDEXED_VALUE_TYPE_KEYWORD\""; then
    echo "$name: not listed as Keyword in namespace $NS after registration" >&2
    exit 1
  fi
done
echo "drctl's search attributes are registered in $NS"
