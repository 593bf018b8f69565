#!/usr/bin/env bash
# Load run for docs/performance.md: builds licensor, serves it on SQLite and
# (when MYSQL_DSN is set, e.g. root@tcp(127.0.0.1:3306)/) on MariaDB with the
# fake vendor, and alternates the cases A/B so both see the same machine.
# Loopback only; each wrk run is bounded by DURATION.
set -euo pipefail
cd "$(dirname "$0")/../.."
DURATION=${DURATION:-10s}
ROUNDS=${ROUNDS:-3}
work=$(mktemp -d)
db="licensor_load_$$" # the MariaDB database of the mysql case
# On any exit (an error, Ctrl-C, the end): stop the servers, then drop the
# database and remove the temp folder (binary, SQLite files, logs, tokens).
cleanup() {
  local pidfile
  for pidfile in "$work"/pid-*; do
    [ -e "$pidfile" ] && kill "$(cat "$pidfile")" 2>/dev/null || true
  done
  wait 2>/dev/null || true # the servers have let go of the database
  if [ -n "${MYSQL_DSN:-}" ]; then
    mysql --protocol=tcp -h127.0.0.1 -uroot -e "DROP DATABASE IF EXISTS $db" || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
go build -o "$work/licensor" .
export APP_ENV=testing APP_KEY="base64:$(head -c 32 /dev/urandom | base64)" LOG_LEVEL=warn APP_STORAGE="$work"

start() { # start DIALECT PORT
  local env=(APP_ADDR=127.0.0.1:$2)
  if [ "$1" = mysql ]; then
    mysql --protocol=tcp -h127.0.0.1 -uroot -e "DROP DATABASE IF EXISTS $db; CREATE DATABASE $db"
    env+=(DB_CONNECTION=mysql "DB_URL=${MYSQL_DSN%/}/$db")
    env "${env[@]}" "$work/licensor" migrate >/dev/null 2>&1
  else
    env+=(DB_DATABASE="$work/load-$2.sqlite")
  fi
  env "${env[@]}" "$work/licensor" serve 2>"$work/serve-$1.log" &
  echo $! >"$work/pid-$1"
  for _ in $(seq 100); do curl -sf "127.0.0.1:$2/healthz" >/dev/null && break; sleep 0.1; done
  env "${env[@]}" "$work/licensor" token issue --consumer "load-$1" --abilities '*' 2>/dev/null >"$work/token-$1"
}

dialects=(sqlite)
[ -n "${MYSQL_DSN:-}" ] && dialects+=(mysql)
port=18080
declare -A ports
for d in "${dialects[@]}"; do ports[$d]=$port; start "$d" "$port"; port=$((port + 1)); done

for round in $(seq "$ROUNDS"); do
  for case in create replay list; do
    for d in "${dialects[@]}"; do
      url="http://127.0.0.1:${ports[$d]}"
      export TOKEN; TOKEN=$(cat "$work/token-$d")
      case $case in
        create) out=$(wrk -t2 -c16 -d"$DURATION" -s docs/load/create.lua "$url") ;;
        replay) out=$(wrk -t2 -c16 -d"$DURATION" -s docs/load/replay.lua "$url") ;;
        list)   out=$(wrk -t2 -c16 -d"$DURATION" -H "Authorization: Bearer $TOKEN" "$url/api/licenses?per_page=15") ;;
      esac
      rps=$(awk '/Requests\/sec/ {print $2}' <<<"$out")
      p50=$(awk '/Latency/ {print $2}' <<<"$out")
      non2xx=$(awk '/Non-2xx/ {print $5}' <<<"$out")
      printf 'round %s  %-7s %-6s  %10s req/s  avg latency %8s  non-2xx %s\n' "$round" "$case" "$d" "$rps" "$p50" "${non2xx:-0}"
    done
  done
done
