#!/usr/bin/env bash
# Stop processes that earlier, cancelled or crashed jobs of this runner's user left behind
# (a hung test_mps.py holding the GPU, a ninja still compiling), so this job starts clean.
#
# usage: cleanup-runner.sh [GRACE_SECONDS]
#   MPS_CLEANUP_PATTERN  extended regex matched against each process's command line
#                        (default: ninja, test_mps.py, pytest and `python -m pipeline` runs)
#
# Only this user's processes are considered, never this script's own ancestors (the runner
# and the job's shell). Run one runner per user account: another runner's jobs would match.
set -euo pipefail

grace="${1:-10}"
pattern="${MPS_CLEANUP_PATTERN:-(^|/)ninja( |$)|test_mps\.py|-m pytest|-m pipeline( |$)}"

# This script and every ancestor up to init must survive.
protected=" $$ "
pid=$$
while [ "${pid:-0}" -gt 1 ]; do
  pid="$(ps -o ppid= -p "$pid" 2>/dev/null | tr -d ' ' || true)"
  protected+="${pid:-0} "
done

victims=()
while read -r pid command; do
  [ -n "$pid" ] || continue
  case "$protected" in *" $pid "*) continue ;; esac
  if printf '%s\n' "$command" | grep -Eq -- "$pattern"; then
    victims+=("$pid")
    echo "cleanup: stopping leftover process $pid: ${command:0:160}"
  fi
done < <(ps -U "$(id -u)" -o pid= -o command=)

if [ "${#victims[@]}" -eq 0 ]; then
  echo "cleanup: no leftover processes"
  exit 0
fi

# A zombie has exited already: only its parent can reap it, no signal will.
alive() {
  local state
  state="$(ps -o stat= -p "$1" 2>/dev/null || true)"
  [ -n "$state" ] && [ "${state#Z}" = "$state" ]
}

survivors() {
  alive_pids=()
  for pid in "${victims[@]}"; do
    if alive "$pid"; then alive_pids+=("$pid"); fi
  done
}

kill -TERM "${victims[@]}" 2>/dev/null || true
for _ in $(seq "$grace"); do
  survivors
  [ "${#alive_pids[@]}" -eq 0 ] && break
  sleep 1
done
survivors
if [ "${#alive_pids[@]}" -gt 0 ]; then
  echo "cleanup: ${#alive_pids[@]} process(es) ignored SIGTERM; sending SIGKILL"
  kill -KILL "${alive_pids[@]}" 2>/dev/null || true
fi
echo "cleanup: stopped ${#victims[@]} leftover process(es)"
