"""mps-pipeline: build-and-CI orchestration for PyTorch's MPS backend.

The layers, top to bottom; each imports only those below it, and siblings joined by ``|``
know nothing of each other (import-linter contracts in pyproject.toml, checked by lint):

- ``__main__`` → ``commands``  parse arguments, call one flow, map errors to exit codes
- ``tasks``                    the doit tasks, derived from the migrate flow's stage table
- ``flows``                    the application: migrate (its stages and their order), pr,
  nightly; runners and renderers below are strung together only here
- ``report`` | ``github``      renderers (values in, text out) | the GitHub REST adapter
- ``guide``                    the metal-kernel guide as pure functions over the tree index:
  checklist, workflows, edit plan, xfail plan
- ``run``                      runners: ninja, pytest
- ``results`` | ``edit``       JUnit, tables, history, decisions | atomic journaled edits
- ``impact``                   a diff's impact: the operators and tests it can affect
- ``workspace``, ``state``, ``options``, ``config``  the tree made ready; the state
  directory's layout; the option table; settings with their origins
- ``sandbox``                  the bundled PyTorch-shaped tree and its simulated backend
- ``tree``                     readers of a PyTorch checkout, one module per file format
- ``testid``; ``errors``, ``dtypes``, ``fsio``  the floor: the consistency-test id; typed
  errors, dtype names, atomic writes

Glossary (one word per concept; the code uses these):

- **operator**: an ATen operator (``atan2``); its **overloads** are native_functions.yaml
  entries (``atan2.out``). An **OpInfo** is the test-side description; its **stem** names
  its tests.
- **test id**: ``test_<kind>_<stem>_mps_<dtype>`` (:class:`pipeline.testid.TestId`).
- **stub**: a ``DECLARE_DISPATCH`` dispatch stub; **functor**: a Metal kernel's struct in a
  ``.metal`` file; **host file**: the ``.mm`` that registers stubs and runs kernels; its
  **exec kind** is the ``exec_KIND_kernel`` a migration writes: unary or binary
  (``tree.objc.ExecKind``).
- **stage**: one step of the migrate chain (audit, edit, build, test_op, table,
  drop_xfails, summary); a **flow** strings stages or steps together.
- **outcome**: pass, fail, error, xfail, xpass, skip of one test (``results.junit.Outcome``);
  a **table** is outcomes per operator and dtype.
- **status**: a checklist item's pass, fail or unknown (``guide.checklist.Status``); a
  functor check's **agreement** with torch is ok, mismatch, known or no reference
  (``results.math.Agreement``).
- **xfail decision**: what to do with one xfail entry given results; its **action** is keep,
  drop_dtypes, delete, narrow_none or move (``results.decide.XfailAction``); the **xfail
  edit** is the change of common_mps.py those decisions make; the nightly's **proposals**
  are decisions that held for several nights, shown as a diff.
- **written**: what keeping the PR's comment or the tracker's section on GitHub did:
  created, updated, unchanged, or dry-run (``github.Written``).
- **impact**: the operators and tests a change can affect (the ``affected`` command and
  ``doit affected`` print it).
- **setting**: one configuration key by its dotted name (``test.kinds``), declared with
  the types its value may have (``sections.Key``); resolved, it carries its **origin**: a
  default, a file, a variable or a flag (``sections.Resolved``).
- **gap**: a part of the tree that could not be read, so a checklist item is unknown (?).
- **history**: the nightly's SQLite database of runs; a **night** is one recorded nightly.
"""
