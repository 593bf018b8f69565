#!/usr/bin/env bash
# run.sh PATCH CMD...: applies PATCH to a scratch worktree of HEAD and runs CMD
# there; prints how long CMD took and whether it failed (a checker that finds
# the mutant fails). The scratch worktree is removed afterwards.
set -uo pipefail
patch=$(readlink -f "$1"); shift
root=$(git rev-parse --show-toplevel)
tmp=$(mktemp -d /tmp/mutant.XXXXXX)
git -C "$root" worktree add --detach "$tmp" HEAD >/dev/null 2>&1 || exit 2
trap 'git -C "$root" worktree remove --force "$tmp" >/dev/null 2>&1; rm -rf "$tmp"' EXIT
git -C "$tmp" apply "$patch" || exit 2
start=$(date +%s.%N)
(cd "$tmp" && "$@")
rc=$?
end=$(date +%s.%N)
printf 'mutant %s: exit %d after %s s (%s)\n' "$(basename "$patch")" "$rc" "$(awk "BEGIN{printf \"%.1f\", $end - $start}")" \
  "$([ $rc -ne 0 ] && echo found || echo NOT found)"
