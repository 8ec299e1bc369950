"""OpInfo metadata: names, aliases, the dtypes test_mps.py tests, and MPS decorators.

Two sources, chosen by :func:`load_opinfos`:

- a static YAML table (``source.opinfo_table``; the bundled sandbox has one), read by
  :func:`load_table`. Schema: a list of mappings::

      - name: atan2                  # required
        variant_test_name: ""        # optional, default ""
        aten_name: atan2             # optional, default: name
        aliases: [arctan2]           # optional
        dtypes: [float32, float16]   # required; canonical names or torch aliases (half...)
        decorators:                  # optional
          - kind: xfail              # xfail | skip | tolerance | precision | other:<name>
            test: TestConsistency.test_output_match   # optional; omitted = every test
            dtypes: [int64]          # optional; omitted = every dtype
            where: "file.py:12"      # optional
        output_dtypes: {int64: float32, float32: float32}   # optional; keys among dtypes

  Unknown keys and duplicate ``name``+``variant_test_name`` pairs are errors.

- the real ``op_db``, dumped by ``opinfo_dump.py`` in a subprocess under ``source.python``
  and cached as JSON (see the cache rule below).

**Output dtypes.** ``OpInfoRecord.output_dtypes`` maps an input dtype to the dtype PyTorch's
result has (atan2: int64 -> float32; neg: int64 -> int64), what a Metal functor must be
registered with. The dump finds it by running the OpInfo's first working CPU sample per
dtype; the dtype of a result that depends on a sample's own ``dtype=`` argument (``to``,
``log_softmax`` with_dtype) is that sample's. Dtypes no sample runs with on CPU are left out:
absent means unknown, not "same as the input".

**Which dtypes test_mps.py instantiates.** ``TestConsistency`` (instantiated only for MPS
as ``TestConsistencyMPS``) decorates ``test_output_match`` with
``@ops(mps_ops_modifier(test_consistency_op_db), allowed_dtypes=MPS_DTYPES)`` and
``test_output_grad_match`` with ``allowed_dtypes=MPS_GRAD_DTYPES`` (float32, float16). The
``ops`` decorator's default ``dtypes=OpDTypes.supported`` takes ``op.supported_dtypes("mps")``,
which the OpInfo sets up as ``dtypesIfMPS`` or, when unset, the CPU ``dtypes``, always minus
float64 and complex128; ``allowed_dtypes`` then intersects. ``MPS_DTYPES`` is
``get_all_dtypes()`` without float64/complex128: float32, float16, bfloat16, int64, int32,
int16, int8, uint8, bool, complex64 (not complex32, not uint16+). So
``dtypes = supported_dtypes("mps") & MPS_DTYPES``; the grad test runs ``dtypes & {float32,
float16}``. This is read from the wheel's opinfo/core.py and common_device_type.py; the
test_mps.py side (not in the wheel) is inferred from upstream versions of that file.

**Cache rule.** The cache file is named by a SHA-256 of the bytes of the files op_db is built
from: ``common_methods_invocations.py``, ``common_dtype.py`` and ``opinfo/**/*.py`` under
``torch/testing/_internal/``, plus the dump script itself. Those files are taken from
``source.root`` when it is a PyTorch checkout (it has them), assuming ``source.python``
imports that checkout's torch, as a develop build does; otherwise from the torch package of
``source.python``, whose location is found once (``importlib.util.find_spec``, which does
not import torch) and recorded in ``opinfo-locations.json`` in the cache directory. The dump
is written to ``<state_dir>/cache`` (where the nightly's workflow collects it), or to
``math.cache`` when that is set (a folder state dirs and checkouts share). A warm load only
hashes about 2 MB and reads one JSON file; it never starts Python.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import TypeVar

import yaml

from pipeline.dtypes import TEST_KINDS, TORCH_ALIASES, sort_key
from pipeline.errors import ConfigError, DocumentError, ParseError, UnreadableFileError
from pipeline.fields import read
from pipeline.fsio import write_atomic
from pipeline.testid import TestId
from pipeline.tree.source import TreeSource
from pipeline.tree.text import read_text

DUMP_SCRIPT = Path(__file__).with_name("opinfo_dump.py")
MPS_GRAD_DTYPES: tuple[str, ...] = ("float32", "float16")
SOURCE_GLOBS = ("common_methods_invocations.py", "common_dtype.py", "opinfo/**/*.py")
INTERNAL = Path("torch", "testing", "_internal")
DUMP_TIMEOUT = 600


@dataclass(frozen=True)
class MpsDecorator:
    """A decorator on an OpInfo that can reach MPS tests.

    ``kind``: xfail, skip, tolerance, precision or ``other:<name>``. ``test``:
    ``"Class.test"`` with ``*`` for an unset part, ``None`` for every test. ``dtypes``:
    canonical, ``None`` for every dtype. ``where``: ``file:line`` of the DecorateInfo, or "".
    """

    kind: str
    test: str | None
    dtypes: tuple[str, ...] | None
    where: str


@dataclass(frozen=True)
class OpInfoRecord:
    """One OpInfo as test_mps.py sees it."""

    name: str
    variant_test_name: str
    aten_name: str
    aliases: tuple[str, ...]
    dtypes: tuple[str, ...]  # what test_output_match is instantiated for (canonical)
    decorators: tuple[MpsDecorator, ...] = ()
    # (input dtype, result dtype) pairs, canonical, in ``dtypes`` order; () = unknown
    output_dtypes: tuple[tuple[str, str], ...] = ()

    @property
    def key(self) -> str:
        """The key common_mps.py's lists use: ``"nn.functional.interpolatearea"``."""
        return self.name + self.variant_test_name

    @property
    def stem(self) -> str:
        """The test-name part: OpInfo.formatted_name (``nn_functional_interpolate_area``)."""
        full = self.name + ("." + self.variant_test_name if self.variant_test_name else "")
        return full.replace(".", "_")

    @property
    def operator(self) -> str:
        """The native_functions.yaml operator it tests: its aten name as the yaml spells it
        (``special.bessel_j0`` -> ``special_bessel_j0``, ``nn.functional.elu`` -> ``elu``)."""
        return operator_spelling(self.aten_name or self.name)

    @property
    def alias_names(self) -> frozenset[str]:
        """Its aliases as op_db writes them and as the yaml spells them (``special.erf``,
        ``special_erf``; ``torch.special.gammainc``, ``special_gammainc``)."""
        return frozenset(self.aliases) | {operator_spelling(a) for a in self.aliases}

    @property
    def names(self) -> frozenset[str]:
        """Every name an operator may find it by: its name, aten name and aliases as op_db
        writes them, and its operator and aliases as the yaml spells them. The name is not
        respelt: an aten name op_db sets is the operator (``nn.functional.unfold`` tests
        ``im2col``, not the ``unfold`` view; its default is the name)."""
        return frozenset({self.name, self.aten_name, self.operator} - {""}) | self.alias_names

    def output_dtype(self, dtype: str) -> str | None:
        """The result dtype PyTorch gives for ``dtype`` inputs (canonical); None if unknown."""
        return dict(self.output_dtypes).get(_dtype(dtype))

    def dtypes_for(self, kind: str = "output_match") -> tuple[str, ...]:
        """The dtypes test_mps.py instantiates ``kind``'s test for (grad: float32/16 only)."""
        if kind not in TEST_KINDS:
            raise ValueError(f"unknown test kind {kind!r}; expected one of {TEST_KINDS}")
        if kind == "output_grad_match":
            return tuple(d for d in self.dtypes if d in MPS_GRAD_DTYPES)
        return self.dtypes

    def test_ids(self, kind: str = "output_match") -> tuple[str, ...]:
        """``TestConsistencyMPS::test_<kind>_<stem>_mps_<dtype>`` for each instantiated dtype."""
        return tuple(TestId(kind, self.stem, d).node for d in self.dtypes_for(kind))


_OPS_PACKET = "torch.ops.aten."
_NN_FUNCTIONAL = "nn.functional."


def operator_spelling(name: str) -> str:
    """How native_functions.yaml spells an operator op_db names with its Python path.

    op_db's ``aten_name`` defaults to the OpInfo's name, so the functions of a Python
    namespace keep their dots: ``special.bessel_j0`` is the yaml's ``special_bessel_j0``
    (``python_module: special``; so ``linalg.``, ``fft.``, ``sparse.``), while
    ``torch.nn.functional`` calls the ``python_module: nn`` operators, which have no prefix:
    ``nn.functional.elu`` is ``elu``. ``torch.`` goes (``torch._scaled_mm``, the alias
    ``torch.special.gammainc``), and an op overload packet loses its overload
    (``torch.ops.aten._safe_softmax.default`` is ``_safe_softmax``). A name the yaml does
    not hold (``masked.sum`` -> ``masked_sum``) stays unmatched: its lookup finds nothing.
    """
    if name.startswith(_OPS_PACKET):
        return name.removeprefix(_OPS_PACKET).split(".", 1)[0]
    name = name.removeprefix("torch.")
    if name.startswith(_NN_FUNCTIONAL):
        return name.removeprefix(_NN_FUNCTIONAL)
    return name.replace(".", "_")


def _dtype(name: str) -> str:
    """Canonical name; a dtype this vocabulary lacks (float8_e4m3fn) keeps torch's name."""
    return TORCH_ALIASES.get(name.removeprefix("torch."), name.removeprefix("torch."))


def _sorted_dtypes(names) -> tuple[str, ...]:
    return tuple(sorted({_dtype(n) for n in names}, key=sort_key))


def _sorted_pairs(mapping: dict) -> tuple[tuple[str, str], ...]:
    """``{input: output}`` as canonical pairs in input-dtype display order."""
    pairs = {_dtype(str(k)): _dtype(str(v)) for k, v in mapping.items()}
    return tuple(sorted(pairs.items(), key=lambda pair: sort_key(pair[0])))


# --- the YAML table ----------------------------------------------------------------------

_SAYS = "says"  # a table field's metadata: a wrong value of it, in the table's own words
_NAME_REQUIRED = "'name' is required and must be a string"
_DECORATOR_KIND = "{name}: each decorator is a mapping with a 'kind'"
Bad = Callable[[str], ParseError]
T = TypeVar("T")


def _says(message: str) -> dict[str, str]:
    return {_SAYS: message}


@dataclass(frozen=True)
class _TableEntry:
    """One OpInfo of a hand-written table as written (schema in the module docs)."""

    name: str = field(metadata=_says(_NAME_REQUIRED))
    dtypes: tuple[object, ...] = field(
        metadata=_says("{name}: 'dtypes' is required and must be a list")
    )
    decorators: tuple[object, ...] | None = field(default=None, metadata=_says(_DECORATOR_KIND))
    variant_test_name: str | None = field(
        default=None, metadata=_says("{name}: variant_test_name must be a string")
    )
    aten_name: str | None = field(
        default=None, metadata=_says("{name}: aten_name must be a string")
    )
    aliases: tuple[str, ...] | None = field(
        default=None, metadata=_says("{name}: aliases must be a list of strings")
    )
    output_dtypes: dict[str, object] | None = field(
        default=None, metadata=_says("{name}: output_dtypes must be a mapping {{input: output}}")
    )


@dataclass(frozen=True)
class _TableDecorator:
    """A decorator of a table's OpInfo as written."""

    kind: str = field(metadata=_says(_DECORATOR_KIND))
    test: str | None = field(
        default=None, metadata=_says("{name}: a decorator's test must be a string")
    )
    dtypes: tuple[object, ...] | None = field(
        default=None, metadata=_says("{name}: dtypes must be a list")
    )
    where: str | None = field(
        default=None, metadata=_says("{name}: a decorator's where must be a string")
    )


def _keys(kind: type) -> set[str]:
    return {f.name for f in fields(kind)}


def _said(kind: type) -> dict[str, str]:
    return {f.name: f.metadata[_SAYS] for f in fields(kind)}


def _table_read(kind: type[T], item: dict[str, object], bad: Bad, name: str) -> T:
    """The ``kind`` a table's mapping holds (its keys known), a wrong value said in the
    table's own words (a hand-written table, not a document this tool wrote), at its line.
    A field's message may name the OpInfo: the entry's name comes first, so it is ``name``
    whenever a later field is wrong."""
    try:
        return read(kind, item, "")
    except DocumentError as e:
        at = e.where.split(".")[0].split("[")[0]  # the field, not the item in it
        raise bad(_said(kind)[at].format(name=name)) from None


def load_table(path: Path) -> tuple[OpInfoRecord, ...]:
    """Read a static OpInfo table (schema in the module docs); ParseError on bad input."""
    where = str(path)
    try:
        text = read_text(path, where)
        # libyaml's loader, when PyYAML has it: the same nodes in a tenth of the time (the
        # sandbox's table is read by every run of its tests)
        loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
        root = yaml.compose(text, Loader=loader)
        data = yaml.load(text, Loader=loader)
    except OSError as exc:
        raise ParseError(where, None, f"cannot read the OpInfo table: {exc}") from exc
    except yaml.YAMLError as exc:
        line = getattr(getattr(exc, "problem_mark", None), "line", None)
        raise ParseError(where, line + 1 if line is not None else None, f"not YAML: {exc}") from exc
    if not isinstance(data, list) or root is None:
        raise ParseError(where, 1, "an OpInfo table is a YAML list of mappings")
    records: list[OpInfoRecord] = []
    seen: set[tuple[str, str]] = set()
    for item, node in zip(data, root.value, strict=True):
        line = node.start_mark.line + 1
        record = _table_record(item, where, line)
        if (record.name, record.variant_test_name) in seen:
            raise ParseError(where, line, f"duplicate OpInfo {record.key!r}")
        seen.add((record.name, record.variant_test_name))
        records.append(record)
    return tuple(records)


def _table_record(item: object, where: str, line: int) -> OpInfoRecord:
    def bad(message: str) -> ParseError:
        return ParseError(where, line, message)

    if not isinstance(item, dict):
        raise bad("each OpInfo is a mapping")
    if unknown := set(item) - _keys(_TableEntry):
        raise bad(f"unknown key(s) {sorted(unknown)}; known: {sorted(_keys(_TableEntry))}")
    entry = _table_read(_TableEntry, item, bad, str(item.get("name")))
    name = entry.name
    if not name:
        raise bad(_NAME_REQUIRED)
    found = tuple(_table_decorator(dec, bad, name) for dec in entry.decorators or ())
    dtypes = _strict_dtypes(entry.dtypes, bad, name)
    return OpInfoRecord(
        name=name,
        variant_test_name=entry.variant_test_name or "",
        aten_name=entry.aten_name or name,
        aliases=entry.aliases or (),
        dtypes=dtypes,
        decorators=found,
        output_dtypes=_strict_outputs(entry.output_dtypes or {}, dtypes, bad, name),
    )


def _table_decorator(dec: object, bad: Bad, name: str) -> MpsDecorator:
    if not isinstance(dec, dict):
        raise bad(_DECORATOR_KIND.format(name=name))
    if unknown := set(dec) - _keys(_TableDecorator):
        raise bad(f"{name}: unknown decorator key(s) {sorted(unknown)}")
    found = _table_read(_TableDecorator, dec, bad, name)
    return MpsDecorator(
        kind=found.kind,
        test=found.test,
        dtypes=None if found.dtypes is None else _strict_dtypes(found.dtypes, bad, name),
        where=found.where or "",
    )


def _strict_dtypes(names: tuple[object, ...], bad: Bad, name: str) -> tuple[str, ...]:
    unknown = [n for n in names if str(n).removeprefix("torch.") not in TORCH_ALIASES]
    if unknown:
        raise bad(f"{name}: unknown dtype(s) {unknown}")
    return _sorted_dtypes(str(n) for n in names)


def _strict_outputs(mapping: dict, dtypes: tuple[str, ...], bad: Bad, name: str):
    """The table's ``output_dtypes``: known dtypes on both sides, inputs among ``dtypes``
    (an output for a dtype the OpInfo is not tested with is most likely a typo)."""
    _strict_dtypes((*mapping, *mapping.values()), bad, name)
    if extra := sorted({_dtype(str(k)) for k in mapping} - set(dtypes), key=sort_key):
        raise bad(f"{name}: output_dtypes for dtype(s) {extra} not in its dtypes")
    return _sorted_pairs(mapping)


# --- the real op_db, through a subprocess and a disk cache -------------------------------


def load_opinfos(source: TreeSource) -> tuple[OpInfoRecord, ...]:
    """All OpInfos: from ``source.opinfo_table`` when set, else op_db (cached, see docs)."""
    return load_op_db(source).records


def load_op_db(source: TreeSource) -> OpDbDump:
    """The OpInfos and the backward dtypes, read once: from ``source.opinfo_table`` when set
    (backward dtypes unknown: none), else op_db (cached, see docs)."""
    if source.opinfo_table is not None:
        return OpDbDump(load_table(source.opinfo_table), {})
    return _dump_data(source)


@dataclass(frozen=True)
class OpDbDump:
    """``opinfo_dump.py``'s answer (its ``main`` has the shape), read once, every key popped."""

    records: tuple[OpInfoRecord, ...]
    # backward operator -> (input dtype, result dtype) pairs torch gives on CPU: what a
    # backward, which has no OpInfo, is registered for; empty when unknown
    backward_dtypes: Mapping[str, tuple[tuple[str, str], ...]]

    @classmethod
    def from_json(cls, data: object, doc: str) -> OpDbDump:
        dump = read(_Dump, data, doc)
        return cls(
            records=tuple(op.record() for op in dump.ops),
            backward_dtypes={
                op: _sorted_pairs(pairs) for op, pairs in (dump.backward_dtypes or {}).items()
            },
        )


@dataclass(frozen=True)
class _DumpedOp:
    """An OpInfo as ``opinfo_dump.py`` writes it; its dtypes made canonical on reading."""

    name: str
    variant_test_name: str
    aten_name: str
    aliases: tuple[str, ...]
    dtypes: tuple[str, ...]
    decorators: tuple[MpsDecorator, ...]
    output_dtypes: dict[str, str]

    def record(self) -> OpInfoRecord:
        return OpInfoRecord(
            name=self.name,
            variant_test_name=self.variant_test_name,
            aten_name=self.aten_name,
            aliases=self.aliases,
            dtypes=_sorted_dtypes(self.dtypes),
            decorators=tuple(
                d if d.dtypes is None else replace(d, dtypes=_sorted_dtypes(d.dtypes))
                for d in self.decorators
            ),
            output_dtypes=_sorted_pairs(self.output_dtypes),
        )


@dataclass(frozen=True)
class _Dump:
    """``opinfo_dump.py``'s answer as written (its ``main`` has the shape)."""

    torch_version: str  # for readers of the cache: which torch it was dumped from
    torch_file: str
    allowed_dtypes: tuple[str, ...]
    ops: tuple[_DumpedOp, ...]
    # backward operator -> {input dtype: result dtype} torch gives on CPU
    backward_dtypes: dict[str, dict[str, str]] | None = None


def _dump_data(source: TreeSource) -> OpDbDump:
    """op_db's dump, from the cache named by its sources' digest, else made and cached."""
    folder = source.answers_cache or source.cache_dir
    cache = folder / f"opinfo-{_source_hash(_source_dir(source))}.json"
    if cache.is_file():
        data = json.loads(cache.read_text(encoding="utf-8"))
    else:
        data = _dump(source.python)
        cache.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(cache, json.dumps(data))
    return OpDbDump.from_json(data, cache.name)


def source_files(source: TreeSource) -> list[Path]:
    """The files the OpInfos come from: the table, or op_db's Python sources."""
    if source.opinfo_table is not None:
        return [source.opinfo_table] if source.opinfo_table.is_file() else []
    internal = _source_dir(source)
    return sorted({p for pattern in SOURCE_GLOBS for p in internal.glob(pattern) if p.is_file()})


# Prints torch's package folder, or nothing when the interpreter has no torch (find_spec does
# not import it, so a broken torch still locates).
_LOCATE_TORCH = (
    "import importlib.util as u; s = u.find_spec('torch'); "
    "print(s.submodule_search_locations[0] if s and s.submodule_search_locations else '')"
)


def _source_dir(source: TreeSource) -> Path:
    """torch/testing/_internal of the checkout, else of source.python's torch package."""
    local = source.root / INTERNAL
    if (local / "common_methods_invocations.py").is_file():
        return local
    locations = source.cache_dir / "opinfo-locations.json"
    known = json.loads(locations.read_text(encoding="utf-8")) if locations.is_file() else {}
    found = known.get(source.python)
    if found and (Path(found) / "common_methods_invocations.py").is_file():
        return Path(found)
    package = _run(source.python, ["-c", _LOCATE_TORCH], "locate torch").strip()
    if not package:  # find_spec found no torch package
        raise ConfigError(
            f"python={source.python} has no torch: pip install torch into it, point python= "
            "(--python, MPS_PIPELINE_PYTHON) at an interpreter that has it, or set "
            "opinfo_table to a static table"
        )
    internal = Path(package) / "testing" / "_internal"
    if not (internal / "common_methods_invocations.py").is_file():
        raise ConfigError(
            f"{source.python} has torch at {package}, but without "
            "testing/_internal/common_methods_invocations.py; set opinfo_table instead"
        )
    known[source.python] = str(internal)
    locations.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(locations, json.dumps(known, indent=1, sort_keys=True))
    return internal


def _source_hash(internal: Path) -> str:
    digest = hashlib.sha256(DUMP_SCRIPT.read_bytes())
    files = sorted({p for pattern in SOURCE_GLOBS for p in internal.glob(pattern) if p.is_file()})
    for path in files:  # content, not mtimes: the cache may travel between CI machines
        digest.update(path.relative_to(internal).as_posix().encode() + b"\0")
        try:
            digest.update(path.read_bytes())
        except OSError as exc:
            raise UnreadableFileError(
                str(path), f"cannot be read: {exc.strerror or exc} (an OpInfo source)"
            ) from None
    return digest.hexdigest()[:24]


def _dump(python: str) -> dict:
    # Run a copy by path, not ``-c`` text: OpInfo.sample_inputs walks the stack with
    # inspect.stack(), which scans every loaded module for each "<string>" frame (10x slower
    # dump). The copy sits alone in a scratch dir, so the script's directory on sys.path
    # cannot shadow anything, as pipeline/tree's own modules would.
    with tempfile.TemporaryDirectory(prefix="mps-pipeline-opinfo-") as tmp:
        script, out = Path(tmp) / DUMP_SCRIPT.name, Path(tmp) / "opinfo.json"
        shutil.copyfile(DUMP_SCRIPT, script)
        _run(python, [str(script), str(out)], "dump op_db")
        return json.loads(out.read_text(encoding="utf-8"))


def _run(python: str, args: list[str], what: str) -> str:
    """Run ``python args`` outside any checkout (so ./torch cannot shadow the package)."""
    with tempfile.TemporaryDirectory(prefix="mps-pipeline-") as scratch:
        try:
            proc = subprocess.run(
                [python, *args],
                cwd=scratch,
                capture_output=True,
                text=True,
                timeout=DUMP_TIMEOUT,
                env={**os.environ, "PYTHONWARNINGS": "ignore"},
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise ConfigError(f"python={python}: cannot {what}: {exc}") from exc
    if proc.returncode != 0:
        # one line: the exception that ended it (the traceback's last line) says what is missing
        lines = [line.strip() for line in proc.stderr.splitlines() if line.strip()]
        last = f": {lines[-1]}" if lines else ""
        raise ConfigError(
            f"python={python} could not {what} (exit {proc.returncode}){last}; point python= "
            "at an interpreter that imports torch with its test dependencies (numpy, "
            "expecttest), or set opinfo_table to a static table"
        )
    return proc.stdout
