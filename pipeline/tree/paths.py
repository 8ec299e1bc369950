"""Where the pipeline's files sit in a PyTorch tree: paths and globs relative to its root.

Dependency-free on purpose: ``pipeline.state`` and ``pipeline.tasks`` run on every doit
start-up and need these paths without importing the readers that parse the files.
"""

from __future__ import annotations

NATIVE_DIR = "aten/src/ATen/native"
MPS_DIR = f"{NATIVE_DIR}/mps"
KERNELS_DIR = f"{MPS_DIR}/kernels"
OPERATIONS_DIR = f"{MPS_DIR}/operations"
# Metal headers the kernels include (indexing.h's REGISTER_* macros, utils.h...)
C10_METAL_DIR = "c10/metal"
TESTING_INTERNAL_DIR = "torch/testing/_internal"
# Inductor's Metal code generator: the c10::metal functions and headers its kernels use
INDUCTOR_MPS_CODEGEN = "torch/_inductor/codegen/mps.py"
# The Inductor test files upstream runs on MPS (test/run_test.py's --mps selection)
INDUCTOR_MPS_TESTS = (
    "test/inductor/test_mps_basic.py",
    "test/inductor/test_torchinductor.py",
    "test/inductor/test_torchinductor_dynamic_shapes.py",
    "test/inductor/test_aot_inductor.py",
)

NATIVE_YAML = f"{NATIVE_DIR}/native_functions.yaml"
KERNELS_METAL = f"{KERNELS_DIR}/*.metal"
OPERATIONS_MM = f"{OPERATIONS_DIR}/*.mm"
# the DECLARE_DISPATCH headers
NATIVE_HEADERS = f"{NATIVE_DIR}/*.h"
# The CPU-side structured kernels MPS shares: they call the stubs the .mm files register.
NATIVE_SOURCES = f"{NATIVE_DIR}/*.cpp"
COMMON_MPS = f"{TESTING_INTERNAL_DIR}/common_mps.py"
# the consistency tests; the default of the test.file setting, which every reader follows
TEST_MPS = "test/test_mps.py"
# The static OpInfo table the bundled sandbox ships (a real tree has op_db instead).
OPINFO_TABLE = f"{TESTING_INTERNAL_DIR}/opinfo_table.yaml"

# What `ninja torch_cpu` compiles that the pipeline reads: yaml, .metal, .mm, the native
# headers declaring the stubs (their types shape a new kernel function) and the shared
# structured kernels calling them.
BUILD_PATTERNS: tuple[str, ...] = (
    NATIVE_YAML,
    KERNELS_METAL,
    OPERATIONS_MM,
    NATIVE_HEADERS,
    NATIVE_SOURCES,
)

# Where MPS xfails live outside common_mps.py (pipeline.tree.decorations): the OpInfo files'
# DecorateInfos and the test files' decorators
OPINFO_SOURCES: tuple[str, ...] = (
    f"{TESTING_INTERNAL_DIR}/common_methods_invocations.py",
    f"{TESTING_INTERNAL_DIR}/opinfo/definitions/*.py",
)
DECORATED_TESTS: tuple[str, ...] = ("test/test_ops.py", TEST_MPS)
DECORATION_PATTERNS: tuple[str, ...] = (*OPINFO_SOURCES, *DECORATED_TESTS)
