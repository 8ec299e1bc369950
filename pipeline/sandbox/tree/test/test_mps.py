# Owner(s): ["module: mps"]
"""MPS consistency tests of the mps-pipeline sandbox.

Named and decorated as in PyTorch's test/test_mps.py: ``TestConsistencyMPS`` has
``test_output_match_<stem>_mps_<dtype>`` for every OpInfo and dtype, and
``test_output_grad_match_<stem>_mps_<dtype>`` for float32/float16, where ``<stem>`` is the
OpInfo name with "." -> "_" plus "_<variant_test_name>". Expected failures and skips come
from torch/testing/_internal/common_mps.py exactly as mps_ops_modifier /
mps_ops_grad_modifier apply them (``unittest.expectedFailure`` for the XFAILLISTs and for
complex dtypes of ops outside SUPPORTED_COMPLEX_OPS, ``unittest.skip`` for the SKIPLISTs),
so an expected failure that now works is reported as "Unexpected success". An OpInfo's MPS
decorators are its record's in opinfo_table.yaml and, when the tree has a
common_methods_invocations.py, the ``DecorateInfo(..., device_type='mps')`` entries of its
``skips=``/``decorators=`` there, as upstream's OpInfo applies them.

Each test runs the op on the simulated MPS device (pipeline.sandbox.backend), which follows
what ``ninja -C build torch_cpu`` last built. Run one operator with
``python -m pytest test/test_mps.py -k test_output_match_atan2``.
"""

import re
import unittest
from pathlib import Path

from pipeline.sandbox import OPINFO_TABLE, backend
from pipeline.tree import common_mps, decorations
from pipeline.tree.opinfo import MPS_GRAD_DTYPES, load_table

ROOT = Path(__file__).resolve().parent.parent
COMPLEX_DTYPES = ("complex32", "complex64")
MODIFIERS = {
    "output_match": "mps_ops_modifier",
    "output_grad_match": "mps_ops_grad_modifier",
}
_MACOS_LIST = re.compile(r"MACOS_BEFORE_(\d+)_(\d+)_XFAILLIST(?:_GRAD)?")


def _expectations(lists, complex_ok, op, kind, dtype, decorators):
    """("skip" | "xfail" | None, reason) for one instantiated test."""
    verdict, reason = None, ""
    for entry in lists.for_key(op.key):
        if entry.function != MODIFIERS[kind]:
            continue
        if entry.dtypes is not None and dtype not in entry.dtypes:
            continue
        if "SPARSE" in entry.list:
            continue  # only the sparse variants of the tests use these
        macos = _MACOS_LIST.fullmatch(entry.list)
        if macos and backend.macos_version() >= (int(macos[1]), int(macos[2])):
            continue
        if "SKIPLIST" in entry.list:
            return "skip", f"{entry.list} in common_mps.py"
        if "XFAILLIST" in entry.list:
            verdict, reason = "xfail", f"{entry.list} in common_mps.py"
    if kind == "output_match" and dtype in COMPLEX_DTYPES and op.key not in complex_ok:
        verdict, reason = "xfail", "not in SUPPORTED_COMPLEX_OPS"
    test = f"TestConsistency.test_{kind}"
    for decorator in decorators:
        cls, _, name = (decorator.test or "*.*").partition(".")
        if cls not in ("*", "TestConsistency") or name not in ("*", f"test_{kind}"):
            continue
        if decorator.dtypes is not None and dtype not in decorator.dtypes:
            continue
        if decorator.kind == "skip":
            return "skip", f"OpInfo decorator on {test}"
        if decorator.kind == "xfail":
            verdict, reason = "xfail", f"OpInfo decorator on {test}"
    return verdict, reason


def _make_test(op, dtype, kind):
    def test(self):
        backend.check(op.aten_name, dtype, root=ROOT, key=op.key, kind=kind)

    return test


class TestConsistencyMPS(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        # Without a build every test errors (rather than "failing as expected")
        backend.load_artifact(ROOT)


def _instantiate(cls):
    lists = common_mps.read(ROOT)
    complex_ok = {
        s.key
        for s in lists.sets
        if s.list == "SUPPORTED_COMPLEX_OPS" and s.function == MODIFIERS["output_match"]
    }
    in_tree = {}  # the sandbox simulates no active_if condition: device_type='mps' only
    for d in decorations.read(ROOT).entries:
        if d.place is decorations.Place.OPINFO and d.device_type == "mps" and not d.active_if:
            in_tree.setdefault(d.key, []).append(d)
    for op in load_table(ROOT / OPINFO_TABLE):
        decorators = (*op.decorators, *in_tree.get(op.key, ()))
        for kind in MODIFIERS:
            dtypes = op.dtypes
            if kind == "output_grad_match":
                dtypes = tuple(d for d in dtypes if d in MPS_GRAD_DTYPES)
            for dtype in dtypes:
                test = _make_test(op, dtype, kind)
                test.__name__ = f"test_{kind}_{op.stem}_mps_{dtype}"
                verdict, reason = _expectations(lists, complex_ok, op, kind, dtype, decorators)
                if verdict == "xfail":
                    test = unittest.expectedFailure(test)
                elif verdict == "skip":
                    test = unittest.skip(reason)(test)
                setattr(cls, test.__name__, test)


_instantiate(TestConsistencyMPS)


if __name__ == "__main__":
    unittest.main()
