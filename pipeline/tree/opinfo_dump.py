"""Dump PyTorch's OpInfo database as JSON: ``python opinfo_dump.py OUT.json``.

Run by :mod:`pipeline.tree.opinfo` under ``settings.python`` (an interpreter that can import
torch and its test dependencies, numpy and expecttest), which need not have mps-pipeline
installed: this file imports only the standard library and torch, and is run as a copy in a
scratch directory. It never imports test/test_mps.py (that needs a Mac); what test_mps.py
adds to the consistency op list is mirrored in ``EXTRA_CONSISTENCY_OPS``.

For each OpInfo it writes name, variant_test_name, aten_name, alias names, the dtypes
``TestConsistency`` is instantiated for on MPS, and the decorators that can reach MPS tests
(see ``mps_decorators``), each with the file:line of the ``DecorateInfo(...)`` call, found by
recording the caller of ``DecorateInfo.__init__`` while op_db is built. It also writes, per
input dtype, the dtype the op's result has on CPU (see ``output_dtypes``), and the same for
the backward operators, which have no OpInfo (see ``backward_dtypes``).
"""

import itertools
import json
import os
import sys
import time
import warnings

# test_mps.py deep-copies op_db and appends copies under new names (op.op rebound to the aten
# op of that name): new name -> OpInfo it is copied from.
EXTRA_CONSISTENCY_OPS = {"_upsample_bicubic2d_aa": "_upsample_bilinear2d_aa"}
CONSISTENCY_CLASS = "TestConsistency"
CONSISTENCY_TESTS = ("test_output_match", "test_output_grad_match")
# Samples tried per (OpInfo, dtype) before giving up on it: the first one usually works, and
# a dtype that fails on several is one the op rejects on CPU.
SAMPLES_PER_DTYPE = 3
# Wall-clock budget for running samples, so a pathological op_db cannot stall the dump; ops
# left when it runs out get no output dtypes (unknown), which readers already allow.
SAMPLING_BUDGET_S = 120.0


def dtype_name(dtype):
    return str(dtype).removeprefix("torch.")


def kind_of(decorator):
    name = getattr(decorator, "__qualname__", None) or type(decorator).__qualname__
    low = name.lower()
    if "expectedfailure" in low or low.startswith("xfail"):
        return "xfail"
    if "skip" in low:
        return "skip"
    if "toleranceoverride" in low:
        return "tolerance"
    if "precisionoverride" in low:
        return "precision"
    return "other:" + name


def mps_decorators(op, core, where):
    """Decorators that apply to MPS: ``device_type == "mps"`` (any test class), and
    device-agnostic ones that reach TestConsistency's tests; plain (non-DecorateInfo)
    decorators only when they are MPS-specific (``expectedFailureMPS``, ``skipMPS``...)."""
    out = []
    for info in op.decorators:
        if isinstance(info, core.DecorateInfo):
            reaches = info.device_type == "mps" or (
                info.device_type is None
                and info.cls_name in (None, CONSISTENCY_CLASS)
                and info.test_name in (None, *CONSISTENCY_TESTS)
            )
            if not reaches:
                continue
            test = None
            if info.cls_name or info.test_name:
                test = f"{info.cls_name or '*'}.{info.test_name or '*'}"
            dtypes = None if info.dtypes is None else sorted({dtype_name(d) for d in info.dtypes})
            for decorator in info.decorators:
                out.append(
                    {
                        "kind": kind_of(decorator),
                        "test": test,
                        "dtypes": dtypes,
                        "where": where.get(id(info), ""),
                    }
                )
        elif getattr(info, "device_type", None) == "mps" or "MPS" in getattr(
            info, "__qualname__", ""
        ):
            out.append({"kind": kind_of(info), "test": None, "dtypes": None, "where": ""})
    return out


def first_tensor(result, torch):
    """The result itself, or the first tensor of a tuple/list result; None if there is none."""
    if isinstance(result, torch.Tensor):
        return result
    if isinstance(result, (tuple, list)):
        return next((r for r in result if isinstance(r, torch.Tensor)), None)
    return None


def output_dtype(op, dtype, torch):
    """The dtype ``op`` gives on CPU for ``dtype`` inputs, from its first working sample;
    None when none of the first few works (the dtype is then left out, i.e. unknown)."""
    # samples are random; seeded, the dump is reproducible. The CPU generator is the one
    # they draw from: torch.manual_seed also queues a seed for each lazy device backend,
    # with a traceback of its caller each, a third of the dump's time.
    torch.random.default_generator.manual_seed(0)
    try:
        samples = op.sample_inputs("cpu", dtype, requires_grad=False)
        for sample in itertools.islice(samples, SAMPLES_PER_DTYPE):
            try:
                out = first_tensor(op(sample.input, *sample.args, **sample.kwargs), torch)
            except Exception:  # this sample is rejected; the next one may not be
                continue
            if out is not None:
                return dtype_name(out.dtype)
    except Exception:  # building samples failed: nothing known for this dtype
        pass
    return None


def output_dtypes(op, dtypes, deadline, torch):
    """Input dtype name -> result dtype name for each of ``dtypes`` that a sample ran with."""
    found = {}
    with torch.no_grad():
        for dtype in sorted(dtypes, key=dtype_name):  # a set: sorted, the cutoff is stable
            if time.monotonic() > deadline:
                break
            result = output_dtype(op, dtype, torch)
            if result is not None:
                found[dtype_name(dtype)] = result
    return found


# Values for a backward's non-Tensor arguments without a default, by schema type: a
# backward whose schema asks for anything else (int[], Tensor[]...) is left out (unknown).
# (TorchScript spells Scalar "number")
PLAIN_ARGUMENTS = {"number": 0.5, "Scalar": 0.5, "float": 0.5, "int": 1, "bool": False}


def backward_dtypes(allowed, torch):
    """aten ``*_backward`` operator -> input dtype name -> result dtype name on CPU, for the
    functional overloads whose arguments can be made up (Tensors of the dtype, plain values):
    a backward has no OpInfo of its own, and its kernel is registered for what torch gives."""
    found = {}
    with torch.no_grad():
        for schema in torch._C._jit_get_all_schemas():
            name = schema.name.removeprefix("aten::")
            if schema.name == name or not name.endswith("_backward") or schema.overload_name:
                continue
            args = [a for a in schema.arguments if a.default_value is None and not a.kwarg_only]
            kinds = [str(a.type) for a in args]
            plain = all(k == "Tensor" or k in PLAIN_ARGUMENTS for k in kinds)
            if "Tensor" not in kinds or not plain:
                continue
            op = getattr(torch.ops.aten, name).default
            outputs = {}
            for dtype in sorted(allowed, key=dtype_name):
                torch.random.default_generator.manual_seed(0)
                values = [
                    torch.randn(2, 3).to(dtype) if k == "Tensor" else PLAIN_ARGUMENTS[k]
                    for k in kinds
                ]
                try:
                    out = first_tensor(op(*values), torch)
                except Exception:  # torch rejects this dtype on CPU
                    continue
                if out is not None:
                    outputs[dtype_name(dtype)] = dtype_name(out.dtype)
            if outputs:
                found[name] = outputs
    return found


class RecordDecorateInfo:
    """Meta-path finder: once opinfo/core.py has run, wrap ``DecorateInfo.__init__`` so that
    every DecorateInfo built afterwards (opinfo/definitions/ is imported by the opinfo
    package itself, common_methods_invocations.py later) records its caller's file:line."""

    MODULE = "torch.testing._internal.opinfo.core"

    def __init__(self, torch_root):
        self.torch_root = torch_root
        self.where = {}

    def find_spec(self, name, path, target=None):
        if name != self.MODULE:
            return None
        from importlib.machinery import PathFinder

        spec = PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None:
            return spec
        run_module = spec.loader.exec_module

        def exec_module(module):
            run_module(module)
            self.wrap(module.DecorateInfo)

        # typeshed types exec_module as a method; replacing it on this one loader instance
        # is the hook (the module runs, then DecorateInfo is wrapped)
        spec.loader.exec_module = exec_module  # type: ignore[method-assign]
        return spec

    def wrap(self, cls):
        original_init = cls.__init__
        where, torch_root = self.where, self.torch_root

        def recording_init(info, *args, **kwargs):
            frame = sys._getframe(1)
            path = os.path.abspath(frame.f_code.co_filename)
            if path.startswith(torch_root + os.sep):
                path = os.path.relpath(path, torch_root).replace(os.sep, "/")
            where[id(info)] = f"{path}:{frame.f_lineno}"
            original_init(info, *args, **kwargs)

        cls.__init__ = recording_init


def main(argv):
    (out_path,) = argv
    warnings.simplefilter("ignore")
    import torch

    torch_root = os.path.dirname(os.path.dirname(os.path.abspath(torch.__file__)))
    recorder = RecordDecorateInfo(torch_root)
    sys.meta_path.insert(0, recorder)
    try:
        from torch.testing._internal.common_methods_invocations import op_db
        from torch.testing._internal.opinfo import core
    finally:
        sys.meta_path.remove(recorder)
    from torch.testing._internal import common_utils

    # Each sample iterator looks for the unittest test running it with inspect.stack(), which
    # reads every frame's source file: outside a unittest run it finds none, which is what
    # this says at once (as math_torch.py does).
    common_utils.extract_test_fn = core.extract_test_fn = lambda: None
    where = recorder.where
    from torch.testing._internal.common_dtype import get_all_dtypes

    # test_mps.py: MPS_DTYPES = get_all_dtypes() without the MPS-unsupported double types.
    allowed = set(get_all_dtypes()) - {torch.float64, torch.complex128}
    # Samples are tiny: a second intra-op thread only adds synchronisation, and on a busy
    # machine spinning OpenMP threads made the sampling twice as slow.
    torch.set_num_threads(1)
    deadline = time.monotonic() + SAMPLING_BUDGET_S

    def record(op, name=None):
        dtypes = set(op.supported_dtypes("mps")) & allowed
        return {
            "name": name or op.name,
            "variant_test_name": op.variant_test_name,
            "aten_name": name or op.aten_name,
            "aliases": [alias.name for alias in op.aliases],
            "dtypes": sorted(dtype_name(d) for d in dtypes),
            "decorators": mps_decorators(op, core, where),
            "output_dtypes": output_dtypes(op, dtypes, deadline, torch),
        }

    records = [record(op) for op in op_db]
    names = {op.name for op in op_db}
    for new, source in EXTRA_CONSISTENCY_OPS.items():
        original = next((op for op in op_db if op.name == source), None)
        if new not in names and original is not None:
            records.append(record(original, new))
    data = {
        "torch_version": torch.__version__,
        "torch_file": torch.__file__,
        "allowed_dtypes": sorted(dtype_name(d) for d in allowed),
        "ops": records,
        "backward_dtypes": backward_dtypes(allowed, torch),
    }
    with open(out_path, "w", encoding="utf-8") as fh:
        json.dump(data, fh)


if __name__ == "__main__":
    main(sys.argv[1:])
