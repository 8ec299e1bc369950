"""Reader for common_mps.py: our fixtures, odd forms, and the released wheels' files."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from pipeline.dtypes import canonical
from pipeline.errors import ParseError
from pipeline.tree import common_mps
from pipeline.tree.common_mps import DictDecl, Span
from tests.conftest import per_release

FIXTURES = Path(__file__).parent.parent / "fixtures" / "common_mps"
REL = "torch/testing/_internal/common_mps.py"


@pytest.fixture(scope="module")
def model() -> common_mps.CommonMps:
    return common_mps.parse((FIXTURES / "common_mps.py").read_text(), REL)


def entry(model, list_name, key, function="mps_ops_modifier"):
    (found,) = [
        e for e in model.entries if (e.list, e.key, e.function) == (list_name, key, function)
    ]
    return found


def test_every_dict_and_set_is_declared_with_its_function(model):
    assert [(d.list, d.function, d.kind) for d in model.dicts] == [
        ("SUPPORTED_COMPLEX_OPS", "mps_ops_modifier", "set"),
        ("MACOS_BEFORE_14_4_XFAILLIST", "mps_ops_modifier", "dict"),
        ("UNIMPLEMENTED_XFAILLIST", "mps_ops_modifier", "dict"),
        ("UNIMPLEMENTED_XFAILLIST_SPARSE", "mps_ops_modifier", "dict"),
        ("UNDEFINED_XFAILLIST", "mps_ops_modifier", "dict"),
        ("ON_MPS_XFAILLIST", "mps_ops_modifier", "dict"),
        ("SKIPLIST", "mps_ops_modifier", "dict"),
        ("XFAILLIST_GRAD", "mps_ops_grad_modifier", "dict"),
        ("ON_MPS_XFAILLIST", "mps_ops_grad_modifier", "dict"),
        ("XFAILLIST", "mps_ops_error_inputs_modifier", "set"),
    ]
    # the annotated declaration's span covers the whole statement
    assert model.dicts[2] == DictDecl(
        "UNIMPLEMENTED_XFAILLIST", "mps_ops_modifier", Span(REL, 33, 55)
    )
    assert len(model.entries) == 20
    assert model.warnings == () and model.unrecognised == ()


def test_values_none_aliases_tuples_and_multiline(model):
    assert entry(model, "UNIMPLEMENTED_XFAILLIST", "geqrf").dtypes is None
    atan2 = entry(model, "UNIMPLEMENTED_XFAILLIST", "atan2")
    assert atan2.dtypes == ("int64", "float16", "bfloat16")  # torch.half canonicalised
    assert atan2.raw is None
    assert entry(model, "UNIMPLEMENTED_XFAILLIST", "nn.functional.gelu").dtypes == ("float16",)
    area = entry(model, "UNIMPLEMENTED_XFAILLIST", "nn.functional.interpolatearea")
    assert area.dtypes == ("uint8", "int8", "float16")
    assert area.span == Span(REL, 40, 44)


def test_comment_spans(model):
    geqrf = entry(model, "UNIMPLEMENTED_XFAILLIST", "geqrf")
    assert geqrf.comment_span == Span(REL, 34, 34)  # "# Missing kernels"
    # a commented-out entry above is a disabled entry, not a comment about linalg.lu
    assert entry(model, "UNIMPLEMENTED_XFAILLIST", "linalg.lu").comment_span is None
    # two comment lines; a trailing comment on the line above does not count
    assert entry(model, "UNIMPLEMENTED_XFAILLIST", "nn.functional.avg_pool1d").comment_span == Span(
        REL, 45, 46
    )
    assert entry(model, "UNIMPLEMENTED_XFAILLIST", "nn.functional.avg_pool2d").comment_span is None
    # the second key of a one-line dict has no comment lines of its own
    assert entry(model, "ON_MPS_XFAILLIST", "nextafter").comment_span is None


def test_same_list_name_in_two_functions_is_kept_apart(model):
    hypot = model.for_key("hypot")
    assert [(e.list, e.function, e.dtypes) for e in hypot] == [
        ("ON_MPS_XFAILLIST", "mps_ops_modifier", ("bfloat16",)),
        ("ON_MPS_XFAILLIST", "mps_ops_grad_modifier", ("float32",)),
    ]
    assert [e.list for e in model.for_key("atan2")] == ["UNIMPLEMENTED_XFAILLIST", "XFAILLIST_GRAD"]


def test_sets(model):
    assert model.set_members("SUPPORTED_COMPLEX_OPS") == {
        "add",
        "atan",
        "cumsum",
        "divno_rounding_mode",
        "nn.functional.interpolatearea",
    }
    assert model.set_members("XFAILLIST") == {"clamp_max", "amax"}
    add = next(s for s in model.sets if s.key == "add")
    assert (add.function, add.span) == ("mps_ops_modifier", Span(REL, 20, 20))


def test_complex_support_from_the_allow_list(model):
    assert model.complex_supported(["add"]) is True
    assert model.complex_supported(["atan2", "arctan2"]) is False


DENY = 'def mps_ops_modifier(ops):\n    UNSUPPORTED_COMPLEX_OPS = {\n        "addr",\n    }\n'


@pytest.mark.parametrize(
    ("text", "keys", "supported"),
    [
        # torch 2.15's form: every OpInfo but the listed ones is expected to pass complex
        (DENY, ["add"], True),
        (DENY, ["addr"], False),
        # an empty deny-list denies nothing
        ("def f():\n    UNSUPPORTED_COMPLEX_OPS = set()\n", ["addr"], True),
        ("def f():\n    UNSUPPORTED_COMPLEX_OPS = {}\n", ["addr"], True),
        # both lists declared: listed in one and not in the other
        (DENY + '    SUPPORTED_COMPLEX_OPS = {"add"}\n', ["add"], True),
        (DENY + '    SUPPORTED_COMPLEX_OPS = {"add", "addr"}\n', ["addr"], False),
        (DENY + '    SUPPORTED_COMPLEX_OPS = {"add"}\n', ["sub"], False),
        # neither: the file says nothing about complex support, so it is unknown
        ('def mps_ops_modifier(ops):\n    XFAILLIST = {"amax"}\n', ["add"], None),
        ("", ["add"], None),
    ],
    ids=[
        "deny-other",
        "deny-listed",
        "deny-empty-set",
        "deny-empty-braces",
        "both-listed",
        "both-denied",
        "both-unlisted",
        "neither",
        "empty-file",
    ],
)
def test_complex_support_allow_list_deny_list_or_unknown(text, keys, supported):
    assert common_mps.parse(text, REL).complex_supported(keys) is supported


def test_odd_forms_are_kept_or_surfaced_never_dropped():
    odd = common_mps.parse((FIXTURES / "odd_forms.py").read_text(), "odd.py")
    values = {
        (e.key, e.span.start): (e.dtypes, e.raw) for e in odd.entries if e.list == "MPS_EXTRA"
    }
    assert values == {
        ("dot", 5): ((), "[torch.int64] if MACOS_VERSION < 14.0 else []"),
        ("pow", 6): (("int16", "uint8"), None),
        ("lerp", 7): (("float16", "bfloat16"), None),
        ("fmod", 8): ((), "HALF_TYPES"),
        ("sinc", 9): ((), None),
        ("trunc", 10): ((), "[torch.float8_e5m2]"),  # a dtype MPS has no kernel type for
        ("sinc", 12): (("float32",), None),
    }
    assert [e.function for e in odd.entries] == [""] * 7 + ["mps_ops_modifier"]
    reasons = {(u.span.start, u.reason.split(" ")[0]) for u in odd.unrecognised}
    assert reasons == {
        (11, "key"),
        (13, "**-unpacking"),
        (19, "entry"),
        (20, "entries"),
        (21, "BUILT"),
        (23, "member"),
    }
    assert "odd.py:5: value of 'dot'" in odd.warnings[0]
    assert any(w.startswith("odd.py:12: 'sinc' appears again") for w in odd.warnings)
    assert len(odd.warnings) == 10
    assert ("EMPTY", "set") in {(d.list, d.kind) for d in odd.dicts}
    assert "lowercase" not in {d.list for d in odd.dicts}


def test_syntax_error_is_a_parse_error_with_line():
    with pytest.raises(ParseError) as info:
        common_mps.parse("X = {\n    'a': None,\n    'b' [torch.int8],\n}\n", "c.py")
    assert info.value.path == "c.py" and info.value.line == 3


def test_read_tree_and_missing_file(tmp_path):
    missing = common_mps.read(tmp_path)
    assert missing.entries == () and "missing" in missing.warnings[0]
    target = tmp_path / REL
    target.parent.mkdir(parents=True)
    target.write_text((FIXTURES / "common_mps.py").read_text())
    assert len(common_mps.read(tmp_path).entries) == 20


def _evaluated_lists(text: str, torch) -> list[tuple[str, int, object]]:
    """Independently of the reader: every UPPER_CASE dict/set literal, evaluated by Python."""
    found = []
    for node in ast.walk(ast.parse(text)):
        if not isinstance(node, (ast.Assign, ast.AnnAssign)) or node.value is None:
            continue
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        names = [t.id for t in targets if isinstance(t, ast.Name) and t.id.isupper()]
        if names and isinstance(node.value, (ast.Dict, ast.Set)):
            code = compile(ast.Expression(node.value), REL, "eval")
            found.append((names[0], node.lineno, eval(code, {"torch": torch})))  # noqa: S307
    return found


# Read from each release's file: how many lists it declares, how many xfail/skip entries
# they hold, its complex list and a key both modifier functions list
REAL_LISTS = {
    "2.13.0": {"dicts": 12, "entries": 193, "complex": ("SUPPORTED_COMPLEX_OPS", 311),
               "in_both": "linalg.matrix_rank"},
    # SUPPORTED_COMPLEX_OPS became UNSUPPORTED_COMPLEX_OPS; the macOS 14.4 and 15.0 lists
    # of mps_ops_modifier and the error-inputs XFAILLIST are gone
    "2.15.0": {"dicts": 11, "entries": 122, "complex": ("UNSUPPORTED_COMPLEX_OPS", 20),
               "in_both": "nn.functional.conv_transpose3d"},
}  # fmt: skip


@pytest.mark.slow
@pytest.mark.realdata
def test_real_file_matches_python_evaluation(real_common_mps, real_release):
    torch = pytest.importorskip("torch")
    text = real_common_mps.read_text()
    # its speed is the benchmark's to measure (a timed assert fails on a loaded machine)
    model = common_mps.parse(text, REL)
    assert model.warnings == () and model.unrecognised == ()

    evaluated = _evaluated_lists(text, torch)
    assert [(name, line) for name, line, _ in evaluated] == [
        (d.list, d.span.start) for d in model.dicts
    ]
    expected = per_release(REAL_LISTS, real_release)
    assert len(model.dicts) == expected["dicts"]
    total = 0
    for decl, (_, _, value) in zip(model.dicts, evaluated, strict=True):
        if decl.kind == "set":
            members = [s.key for s in model.sets if decl.span.contains(s.span.start)]
            assert set(members) == value and len(members) == len(value)
            continue
        mine = [
            e for e in model.entries if e.list == decl.list and decl.span.contains(e.span.start)
        ]
        total += len(mine)
        assert {e.key: e.dtypes for e in mine} == {
            key: None if dtypes is None else tuple(canonical(str(d)) for d in dtypes)
            for key, dtypes in value.items()
        }
    assert total == len(model.entries) == expected["entries"]
    complex_list, members = expected["complex"]
    assert len(model.set_members(complex_list)) == members
    assert {e.function for e in model.for_key(expected["in_both"])} == {
        "mps_ops_modifier",
        "mps_ops_grad_modifier",
    }
    # the same answers from an allow-list (2.13) and a deny-list (2.15)
    assert model.complex_supported(["add"]) is True
    assert model.complex_supported(["linalg.eig"]) is False
