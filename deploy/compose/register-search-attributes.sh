#!/bin/sh
# Registers drctl's search attributes (see drctl/search_attributes.py). Idempotent.
set -e
for name in DrctlFleet DrctlOperation DrctlPhase DrctlSourceRegion DrctlTargetRegion DrctlVerdict; do
  temporal operator search-attribute create --name "$name" --type Keyword || true
done
