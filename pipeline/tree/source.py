"""What the readers need to know about a tree, and nothing of the rest of the settings."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class TreeSource:
    """A PyTorch tree to read, where to cache what was read, and where OpInfos come from."""

    root: Path
    cache_dir: Path
    # the interpreter that imports torch for op_db, when there is no static table
    python: str
    opinfo_table: Path | None
    # which consistency tests an operator's record lists (output_match, output_grad_match)
    test_kinds: tuple[str, ...] = ("output_match",)
    # ``math.cache`` when set: a folder of torch's answers, named by digests, that state dirs
    # share; op_db's dump is one (a torch import and a sample run per OpInfo: about 20 s)
    answers_cache: Path | None = None
