#!/usr/bin/env bash
# Run one shard of the full MPS consistency sweep and write its JUnit report.
#
# usage: run-sweep.sh SHARD NUM_SHARDS OUT_XML [extra pytest args...]
#   Run from the PyTorch checkout. PYTHON selects the interpreter (default: python).
#   MPS_SHARD_PLAN=FILE: a plan of `python -m pipeline shards --num-shards NUM_SHARDS`; the
#   tests it puts in shard SHARD run (through the pytest plugin mps_pipeline_shard, which
#   spreads tests the plan does not know by a hash). Without it, or when FILE is missing or
#   not a plan of NUM_SHARDS shards (a warning), sharding uses --shard-id/--num-shards
#   (1-based), which PyTorch's test/conftest.py adds.
#
# Exit status: 0 when the sweep ran, even with failing tests (those are the nightly's data,
# judged by `python -m pipeline nightly`); non-zero when pytest could not run the tests.
set -euo pipefail

if [ "$#" -lt 3 ]; then
  echo "usage: run-sweep.sh SHARD NUM_SHARDS OUT_XML [pytest args...]" >&2
  exit 2
fi
shard="$1" num_shards="$2" out="$3"
shift 3

mkdir -p "$(dirname "$out")"
out="$(cd "$(dirname "$out")" && pwd)/$(basename "$out")"
python="${PYTHON:-python}"
plugins="$(cd "$(dirname "${BASH_SOURCE[0]}")/../../pipeline/run/pytest_plugin" && pwd)"

sharding=(--shard-id "$shard" --num-shards "$num_shards")
how="--shard-id/--num-shards"
plan="${MPS_SHARD_PLAN:-}"
if [ -n "$plan" ]; then
  if [ ! -f "$plan" ]; then
    echo "::warning title=No shard plan::$plan does not exist; sharding by $how"
  elif said="$("$python" "$plugins/mps_pipeline_shard.py" "$plan" "$shard" "$num_shards" 2>&1)"
  then
    plan="$(cd "$(dirname "$plan")" && pwd)/$(basename "$plan")"
    sharding=(-p mps_pipeline_shard --mps-shard-plan "$plan" --mps-shard "$shard")
    how="the plan $plan ($said tests planned in this shard)"
    export PYTHONPATH="$plugins${PYTHONPATH:+:$PYTHONPATH}"
  else
    echo "::warning title=Shard plan not used::$said; sharding by $how"
  fi
fi
echo "sweep: shard $shard/$num_shards by $how"

status=0
(
  cd test
  "$python" -m pytest test_mps.py \
    -k "TestConsistencyMPS" \
    "${sharding[@]}" \
    --junit-xml "$out" -o junit_family=xunit2 \
    -p no:cacheprovider -q "$@"
) || status=$?

# pytest: 0 all passed, 1 some tests failed; anything else means the run itself broke.
if [ "$status" -gt 1 ]; then
  echo "::error title=MPS sweep did not run::pytest exited $status on shard $shard/$num_shards"
  exit "$status"
fi
if [ ! -s "$out" ]; then
  echo "::error title=No JUnit report::pytest wrote no report to $out"
  exit 1
fi
echo "sweep: shard $shard/$num_shards finished (pytest exit $status); report: $out"
