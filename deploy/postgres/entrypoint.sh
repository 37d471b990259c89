#!/bin/sh
# Start PostgreSQL 15 as user postgres; on first start (an empty $PGDATA) make the cluster:
# superuser $POSTGRES_USER (default dynaeval) with $POSTGRES_PASSWORD (required), database
# $POSTGRES_DB (default dynaeval), password (scram) logins from any address on the network.
set -eu
: "${POSTGRES_PASSWORD:?POSTGRES_PASSWORD must be set}"
user="${POSTGRES_USER:-dynaeval}"
db="${POSTGRES_DB:-dynaeval}"
PGDATA="${PGDATA:-/var/lib/postgresql/data}"
export PGDATA
mkdir -p "$PGDATA" /run/postgresql
chown postgres:postgres "$PGDATA" /run/postgresql
chmod 0700 "$PGDATA"
as_postgres() { setpriv --reuid=postgres --regid=postgres --init-groups "$@"; }

if [ ! -s "$PGDATA/PG_VERSION" ]; then
    echo "postgres-entrypoint: initdb in $PGDATA (superuser $user, database $db)"
    pwfile="$(mktemp)"
    printf '%s\n' "$POSTGRES_PASSWORD" > "$pwfile"
    chown postgres "$pwfile"
    # --no-sync, then one syncfs: much faster than initdb's fsync of every file.
    as_postgres initdb -D "$PGDATA" -U "$user" --pwfile="$pwfile" -E UTF8 --locale=C.UTF-8 \
        --auth-local=trust --auth-host=scram-sha-256 --no-sync >/dev/null
    rm -f "$pwfile"
    {
        echo "host all all 0.0.0.0/0 scram-sha-256"
        echo "host all all ::/0 scram-sha-256"
    } >> "$PGDATA/pg_hba.conf"
    {
        echo "listen_addresses = '*'"
        echo "max_connections = 200"
    } >> "$PGDATA/postgresql.conf"
    if [ "$db" != "postgres" ]; then
        echo "CREATE DATABASE \"$db\" OWNER \"$user\";" \
            | as_postgres postgres --single -D "$PGDATA" -j postgres >/dev/null
    fi
    sync -f "$PGDATA"
    echo "postgres-entrypoint: cluster ready"
fi
exec setpriv --reuid=postgres --regid=postgres --init-groups postgres -D "$PGDATA" "$@"
