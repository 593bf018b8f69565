#!/usr/bin/env bash
# A/B of SQLite pool sizes (1 vs 4 connections) for docs/performance.md; loopback only, bounded runs.
set -euo pipefail
cd "$(dirname "$0")/../.."
work=$(mktemp -d); go build -o "$work/licensor" .
export APP_ENV=testing APP_KEY="base64:$(head -c 32 /dev/urandom | base64)" LOG_LEVEL=warn APP_STORAGE="$work"
for conns in 1 4; do
  port=$((19000 + conns))
  APP_ADDR=127.0.0.1:$port DB_DATABASE="$work/db$conns.sqlite" DB_MAX_OPEN_CONNS=$conns DB_MAX_IDLE_CONNS=$conns "$work/licensor" serve 2>/dev/null &
  echo $! > "$work/pid$conns"
  for _ in $(seq 100); do curl -sf 127.0.0.1:$port/healthz >/dev/null && break; sleep 0.1; done
  DB_DATABASE="$work/db$conns.sqlite" "$work/licensor" token issue --consumer ab --abilities '*' 2>/dev/null > "$work/tok$conns"
done
trap 'kill $(cat $work/pid1) $(cat $work/pid4)' EXIT
for round in 1 2 3; do
  for case in create replay list; do
    for conns in 1 4; do
      export TOKEN=$(cat "$work/tok$conns"); url=http://127.0.0.1:$((19000 + conns))
      case $case in
        create) out=$(wrk -t2 -c16 -d6s -s docs/load/create.lua "$url") ;;
        replay) out=$(wrk -t2 -c16 -d6s -s docs/load/replay.lua "$url") ;;
        list)   out=$(wrk -t2 -c16 -d6s -H "Authorization: Bearer $TOKEN" "$url/api/licenses?per_page=15") ;;
      esac
      printf 'round %s %-6s conns=%s %10s req/s  non-2xx %s\n' $round $case $conns "$(awk '/Requests\/sec/ {print $2}' <<<"$out")" "$(awk '/Non-2xx/ {print $5}' <<<"$out")"
    done
  done
done
