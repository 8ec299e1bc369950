#!/usr/bin/env bash
# Run one shard of the full MPS consistency sweep and write its JUnit report.
#
# usage: run-sweep.sh SHARD NUM_SHARDS OUT_XML [extra pytest args...]
#   Run from the PyTorch checkout. PYTHON selects the interpreter (default: python).
#   Sharding uses --shard-id/--num-shards (1-based), which PyTorch's test/conftest.py adds.
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

status=0
(
  cd test
  "$python" -m pytest test_mps.py \
    -k "TestConsistencyMPS" \
    --shard-id "$shard" --num-shards "$num_shards" \
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
