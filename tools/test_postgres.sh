#!/usr/bin/env bash
# A throwaway PostgreSQL server on loopback, for the ledger tests (docs/budgets.md).
#
#   tools/test_postgres.sh start DIR   # initdb into DIR, start; prints the URL on stdout
#   tools/test_postgres.sh stop DIR    # stop the server of DIR (DIR is left for the caller)
#
# Finds Debian's server binaries (/usr/lib/postgresql/*/bin) or initdb on PATH; with
# DPERM_INSTALL_POSTGRES=1 and root, installs Debian's `postgresql` package when there
# are none.  PostgreSQL refuses to run as root: as root, the server runs as the
# `postgres` user (created when missing).  Trust authentication, loopback only, fsync
# off (a test server).  Exit 3: no server binaries.
set -euo pipefail
cmd="${1:?start|stop}"
dir="${2:?DIR}"

find_bin() {
    local d best=""
    for d in /usr/lib/postgresql/*/bin; do
        [ -x "$d/initdb" ] && best="$d"
    done
    if [ -z "$best" ] && command -v initdb >/dev/null 2>&1; then
        best="$(dirname "$(command -v initdb)")"
    fi
    echo "$best"
}

as_server() {
    if [ "$(id -u)" = 0 ]; then
        runuser -u postgres -- "$@"
    else
        "$@"
    fi
}

case "$cmd" in
start)
    bin="$(find_bin)"
    if [ -z "$bin" ] && [ "${DPERM_INSTALL_POSTGRES:-0}" = 1 ] && [ "$(id -u)" = 0 ]; then
        echo "installing PostgreSQL (Debian package postgresql)" >&2
        apt-get update -qq >&2
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >&2
        bin="$(find_bin)"
    fi
    if [ -z "$bin" ]; then
        echo "no PostgreSQL server binaries (initdb) on this machine" >&2
        exit 3
    fi
    mkdir -p "$dir"
    if [ "$(id -u)" = 0 ]; then
        id postgres >/dev/null 2>&1 || useradd --system --no-create-home postgres
        chown postgres "$dir"
    fi
    port="$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
    as_server "$bin/initdb" -D "$dir/data" -A trust -U dperm --no-sync -E UTF8 >"$dir/initdb.log" 2>&1 \
        || { cat "$dir/initdb.log" >&2; exit 1; }
    as_server "$bin/pg_ctl" -D "$dir/data" -l "$dir/data/server.log" -w -t 60 \
        -o "-c listen_addresses=127.0.0.1 -p $port -k $dir -c fsync=off -c max_connections=200" \
        start >&2
    echo "postgresql://dperm@127.0.0.1:$port/postgres"
    ;;
stop)
    bin="$(find_bin)"
    if [ -n "$bin" ] && [ -f "$dir/data/postmaster.pid" ]; then
        as_server "$bin/pg_ctl" -D "$dir/data" -m fast -w stop >&2 || true
    fi
    ;;
*)
    echo "usage: $0 start|stop DIR" >&2
    exit 2
    ;;
esac
