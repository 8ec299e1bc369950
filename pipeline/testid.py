"""The one home of test_mps.py's consistency-test id: ``test_<kind>_<stem>_mps_<dtype>``.

``TestConsistency`` is instantiated for MPS as ``TestConsistencyMPS``; each OpInfo (by its
stem: the name with ``.`` as ``_``) gets one test per kind and instantiated dtype. Every
module that makes, selects or reads such an id goes through :class:`TestId` and the
selectors here, so the format is written once.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from pipeline.dtypes import TORCH_ALIASES

TEST_CLASS = "TestConsistencyMPS"
DTYPES = frozenset(TORCH_ALIASES.values())  # the canonical dtype names an id may end in
# prefix -> kind, for dtypes.TEST_KINDS; spelled out because parse runs once per JUnit testcase
_PREFIXES = (
    ("test_output_match_", "output_match"),
    ("test_output_grad_match_", "output_grad_match"),
)


@dataclass(frozen=True, slots=True)
class TestId:
    """One consistency test: ``str()`` is its name, :meth:`parse` reads one back."""

    __test__: ClassVar[bool] = False  # a value type, not a test class for pytest to collect

    kind: str  # one of dtypes.TEST_KINDS
    stem: str  # the OpInfo's stem: atan2, nn_functional_pad_constant
    dtype: str  # canonical dtype name

    def __str__(self) -> str:
        return f"test_{self.kind}_{self.stem}_mps_{self.dtype}"

    @property
    def node(self) -> str:
        """``TestConsistencyMPS::test_...``: the id as pytest and the shard plans name it."""
        return f"{TEST_CLASS}::{self}"

    @classmethod
    def parse(cls, name: str) -> TestId | None:
        """``test_output_match_nn_functional_pad_constant_mps_float16`` -> the id; None for
        any other test. See :func:`parse_parts` for the rule."""
        parts = parse_parts(name)
        return None if parts is None else cls(*parts)


def parse_parts(name: str) -> tuple[str, str, str] | None:
    """``(kind, stem, dtype)`` of a test name, None when it is no consistency test.

    The dtype is whatever follows the last ``_mps_`` (stems contain underscores and may
    contain '-'); it must be a known dtype name. A tuple rather than a :class:`TestId`:
    the JUnit reader calls this for every testcase of a 100,000-case report.
    """
    head, sep, dtype = name.rpartition("_mps_")
    if sep and dtype in DTYPES and (parts := parse_head(head)):
        return parts[0], parts[1], dtype
    return None


def parse_head(head: str) -> tuple[str, str] | None:
    """``(kind, stem)`` of what comes before a test name's last ``_mps_``, or None.

    Apart so that the JUnit reader can cache it per operator (its 16 dtypes share a head).
    No prefix holds ``_mps_``, so the last one of a name is the one after its stem.
    """
    for prefix, kind in _PREFIXES:
        if head.startswith(prefix):
            stem = head[len(prefix) :]
            return (kind, stem) if stem else None
    return None


def selector(kind: str, stem: str) -> str:
    """The pytest ``-k`` substring selecting every dtype of one OpInfo's ``kind`` test."""
    return f"test_{kind}_{stem}_mps_"


def kind_selector(kind: str) -> str:
    """The pytest ``-k`` substring selecting every OpInfo's ``kind`` test (a full sweep)."""
    return f"test_{kind}"


def node_of(classname: str, name: str) -> str:
    """A JUnit row's test as a node id: pytest's classname ``test_mps.TestConsistencyMPS``
    and PyTorch CI's bare ``TestConsistencyMPS`` both give ``TestConsistencyMPS::<name>``."""
    return f"{classname.rpartition('.')[2]}::{name}"
