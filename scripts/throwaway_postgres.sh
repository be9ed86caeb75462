#!/usr/bin/env bash
# A throwaway PostgreSQL cluster for the store's tests (tests/store_fixtures.py, .ci/run), from Debian's
# `postgresql` package: trust authentication on 127.0.0.1 only, a free port, no fsync, its socket and data
# in DIR. Run as root it runs the server as the `postgres` user (PostgreSQL refuses root), who must be able
# to reach DIR: make it with `mktemp -d` and `chmod 755` (a directory under a private one, like pytest's, fails).
#   scripts/throwaway_postgres.sh start DIR   prints the URL, postgresql://typedrag@127.0.0.1:PORT/typedrag
#   scripts/throwaway_postgres.sh stop DIR
set -euo pipefail
action="${1:?start or stop}"
dir="${2:?a directory for the cluster}"
bin="$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)"
if [ -z "$bin" ] || [ ! -x "$bin/initdb" ]; then
    echo "no PostgreSQL server on this machine (Debian: apt-get install postgresql)" >&2
    exit 1
fi
as_owner() {
    if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}
case "$action" in
start)
    mkdir -p "$dir"
    if [ "$(id -u)" = 0 ]; then
        chown postgres "$dir"
        if ! runuser -u postgres -- test -w "$dir"; then
            echo "the postgres user cannot reach $dir: use a directory every user can enter (mktemp -d, chmod 755)" >&2
            exit 1
        fi
    fi
    port="$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
    as_owner "$bin/initdb" -D "$dir/data" -U typedrag -A trust --no-sync -E UTF8 --locale=C.UTF-8 >"$dir/initdb.log" 2>&1
    as_owner "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 120 \
        -o "-p $port -k $dir -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=300" start >/dev/null
    as_owner "$bin/createdb" -h 127.0.0.1 -p "$port" -U typedrag typedrag
    echo "postgresql://typedrag@127.0.0.1:$port/typedrag"
    ;;
stop)
    as_owner "$bin/pg_ctl" -D "$dir/data" -m immediate stop >/dev/null 2>&1 || true
    ;;
*)
    echo "usage: $0 start|stop DIR" >&2
    exit 2
    ;;
esac
