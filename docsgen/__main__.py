"""``python -m docsgen screenshot|sample``: regenerate what the README shows from real runs.

- ``screenshot``: three real nightlies of a demo checkout, the dashboard opened in headless
  Chromium, its picture written to ``docs/img/dashboard.png`` (``nox -s screenshots``);
- ``sample``: a demo checkout's first and second ``migrate atan2``, their terminal output
  written into README.md between the sample markers (``nox -s sample``).
"""

from __future__ import annotations

import argparse
import re
import sys
import tempfile
from pathlib import Path

from docsgen.runs import Shown, demo_nightlies, first_hour

REPO = Path(__file__).resolve().parents[1]
SCREENSHOT = REPO / "docs" / "img" / "dashboard.png"
README = REPO / "README.md"
BEGIN, END = "<!-- sample: begin (python -m docsgen sample) -->", "<!-- sample: end -->"
# progress bars print a line per step when the output is not a terminal: the last one stays
_PROGRESS = re.compile(r"^(tests|build): +\d+% \(")
_RUN_FOLDER = re.compile(r"results/\d{8}T\d{6}Z-")


def screenshot(out: Path = SCREENSHOT) -> Path:
    from docsgen.browser import open_page

    with tempfile.TemporaryDirectory(prefix="mps-pipeline-screenshot-") as work:
        dashboard = demo_nightlies(Path(work))
        with open_page(dashboard / "index.html", width=1100, height=1500) as page:
            if page.console_errors:
                raise SystemExit(f"the dashboard logged errors: {page.console_errors}")
            page.screenshot(out, full_page=True)
    return out


CUT = "   …"


def _short(lines: list[str]) -> list[str]:
    """The run's lines with the long parts cut (each cut shown as ``…``): the checklist's
    items (audit prints them all), check-math's table (its first line says how it went;
    the rest names this machine's compiler and headers), the xfail diff, and the summary's
    body (its last paragraph is the ``verdict:`` line that follows)."""
    out: list[str] = []
    stage = ""
    in_diff = False
    for line in lines:
        if line.startswith((".  ", "-- ")):
            stage, in_diff = line[3:].split(":")[0], False
            out.append(line)
            continue
        if line.startswith(("verdict:", "verdict (", "summary:")):
            stage = ""
        cut = (
            (stage == "audit" and line.startswith((" ✓", " ✗", " ?", "     ")))
            or (stage == "summary")
            or (stage == "check_math" and not line.startswith("check-math:"))
            or (stage == "drop_xfails" and (in_diff or line.startswith("--- a/")))
        )
        if stage == "drop_xfails" and line.startswith("--- a/"):
            in_diff = True
        elif in_diff and not line.strip():
            in_diff = False
        if not cut:
            out.append(line)
        elif out[-1] != CUT:
            out.append(CUT)
    return out


def _terminal(shown: list[Shown], work: Path) -> str:
    """What the user saw, with the scratch folder written as ``~``, progress lines and the
    long parts cut (:func:`_short`)."""
    text = ""
    for step, run in enumerate(shown):
        lines = [line.rstrip() for line in run.output.splitlines() if not _PROGRESS.match(line)]
        lines = _short(lines)
        command = run.command if step == 0 else f"cd ~/mps-demo && {run.command}"
        if step == 0:
            command = command.replace("demo mps-demo", "demo ~/mps-demo")
        text += f"$ {command}\n" + "\n".join(lines) + "\n"
        if step < len(shown) - 1:
            text += "\n"
    text = text.replace(str(work), "~")
    return _RUN_FOLDER.sub("results/<time>-", text)


def sample_text(python: str = sys.executable) -> str:
    """The sample as the README shows it, from a fresh run in a scratch folder (its name's
    length decides where a long line wraps: always the same kind of name)."""
    with tempfile.TemporaryDirectory(prefix="mps-pipeline-sample-") as tmp:
        work = Path(tmp).resolve()
        return _terminal(first_hour(work, python=python), work)


def sample(readme: Path = README) -> str:
    text = sample_text()
    doc = readme.read_text(encoding="utf-8")
    if BEGIN not in doc or END not in doc:
        raise SystemExit(f"{readme} has no sample markers ({BEGIN} ... {END})")
    head, rest = doc.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    readme.write_text(f"{head}{BEGIN}\n```console\n{text}```\n{END}{tail}", encoding="utf-8")
    return text


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m docsgen", description=__doc__)
    parser.add_argument("what", choices=("screenshot", "sample"))
    args = parser.parse_args(argv)
    if args.what == "screenshot":
        print(f"wrote {screenshot()}")
    else:
        sample()
        print(f"wrote the sample into {README}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
