#!/usr/bin/env bash
# Fail early, with a message that says what to delete, when the runner's disk is nearly
# full: a PyTorch build dies an hour in with an obscure linker error otherwise.
#
# usage: check-disk.sh [MIN_FREE_GB] [PATH]
#   MIN_FREE_GB defaults to $MPS_MIN_FREE_GB, else 40; PATH defaults to the current directory.
set -euo pipefail

min_gb="${1:-${MPS_MIN_FREE_GB:-40}}"
target="${2:-.}"

case "$min_gb" in
  '' | *[!0-9]*)
    echo "check-disk: MIN_FREE_GB must be a whole number of GB, got '$min_gb'" >&2
    exit 2
    ;;
esac

# POSIX output (-P, 1024-byte blocks) reads the same on macOS and Linux.
free_kb="$(df -Pk "$target" | awk 'NR == 2 { print $4 }')"
free_gb=$((free_kb / 1024 / 1024))

if [ "$free_gb" -lt "$min_gb" ]; then
  msg="only ${free_gb} GB free on $(df -Pk "$target" | awk 'NR == 2 { print $6 }'), need ${min_gb} GB."
  msg+=" Free space on the runner: remove stale build directories under the runner's"
  msg+=" _work/<repo>/<repo> folder (the pytorch/ and mps-pipeline/ that templates before"
  msg+=" mps-pr/ and mps-nightly/ left; mps-pr/pytorch/build and mps-pr/ccache, which the next"
  msg+=" PR job rebuilds), ~/Library/Developer/Xcode/DerivedData, ~/Library/Caches/pip and old"
  msg+=" ~/.mps-pipeline state; or lower MPS_MIN_FREE_GB if the build really fits."
  echo "::error title=Low disk space::${msg}"
  echo "check-disk: ${msg}" >&2
  exit 1
fi
echo "check-disk: ${free_gb} GB free (need ${min_gb} GB)"
