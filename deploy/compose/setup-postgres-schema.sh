#!/bin/sh
# One-shot, in temporalio/admin-tools: creates Temporal's two PostgreSQL databases and brings their
# schemas to the version the admin-tools image ships (the same release as temporalio/server).
# Idempotent: a database that exists is only updated (update-schema applies newer versions only);
# any other failure stops here, and the server, which waits for this service, never starts.
set -eu
: "${POSTGRES_SEEDS:?POSTGRES_SEEDS must name the PostgreSQL host (deploy/compose/postgres.env)}"
: "${POSTGRES_USER:?POSTGRES_USER must be set (deploy/compose/postgres.env)}"
: "${SQL_PASSWORD:?SQL_PASSWORD must be set (deploy/compose/postgres.env)}"
PORT=${DB_PORT:-5432}
SCHEMA=/etc/temporal/schema/postgresql/v12

sql() {
  temporal-sql-tool --plugin postgres12 --ep "$POSTGRES_SEEDS" -u "$POSTGRES_USER" -p "$PORT" "$@"
}

for pair in temporal:temporal temporal_visibility:visibility; do
  db=${pair%%:*} dir=${pair#*:}
  if out=$(sql --db "$db" create 2>&1); then
    echo "$db: created"
    sql --db "$db" setup-schema -v 0.0
  elif echo "$out" | grep -q "already exists"; then
    echo "$db: exists, updating its schema"
  else
    echo "$db: cannot create: $out" >&2
    exit 1
  fi
  sql --db "$db" update-schema -d "$SCHEMA/$dir/versioned"
done
echo "Temporal's PostgreSQL schemas are up to date"
