"""pipeline/flows/migrate.py: the stage table every doit task and --stage choice comes from."""

from __future__ import annotations

from pathlib import Path

from pipeline.config import load_settings
from pipeline.flows.migrate import BY_NAME, STAGE_NAMES, STAGES, VARIABLES
from pipeline.flows.request import Request
from tests.conftest import settings_env


def _request(tmp_path: Path, **kw: object) -> Request:
    settings = load_settings(
        {"state_dir": str(tmp_path / "state")}, env=settings_env(), cwd=tmp_path
    )
    return Request(settings, "atan2", **kw)  # type: ignore[arg-type]


def _order(request: Request) -> list[str]:
    """The stages migrate_op runs, in doit's order (depth first), refusing a cycle."""
    order: list[str] = []

    def visit(name: str, path: tuple[str, ...]) -> None:
        assert name not in path, f"cycle: {' -> '.join((*path, name))}"
        for before in BY_NAME[name].after(request):
            assert before in BY_NAME
            visit(before, (*path, name))
        if name not in order:
            order.append(name)

    visit("migrate_op", ())
    return order


def test_every_stage_runs_after_stages_of_the_table_without_a_cycle(tmp_path: Path) -> None:
    for dry_run in (False, True):
        order = _order(_request(tmp_path, dry_run=dry_run))
        if dry_run:
            assert order == ["preview", "migrate_op"]
        else:
            # the guide's order: audit, edit, the math on the host, build, test, table, drop
            # xfails, summary
            assert order == [
                "audit", "edit", "check_math", "build", "test_op", "table", "drop_xfails",
                "summary",
                "migrate_op",
            ]  # fmt: skip


def test_names_and_variables_are_declared_once() -> None:
    assert tuple(s.name for s in STAGES) == STAGE_NAMES and len(set(STAGE_NAMES)) == len(STAGES)
    for stage in STAGES:
        assert stage.doc and set(stage.all_variables) <= set(VARIABLES)
    # only the chain's entry point has no action of its own
    assert [s.name for s in STAGES if s.action is None] == ["migrate_op"]


def test_outputs_live_in_the_state_dir_and_per_op_stages_name_the_operator(
    tmp_path: Path,
) -> None:
    request = _request(tmp_path)
    state = request.settings.state_dir
    for stage in STAGES:
        for out in stage.outputs(request):
            assert out.is_relative_to(state)
            if stage.per_op:
                assert "atan2" in out.parts
