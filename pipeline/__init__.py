"""mps-pipeline: build-and-CI orchestration for PyTorch's MPS backend.

Package map (each family has one uniform interface):

- ``pipeline.tree``     read a PyTorch source tree (one reader module per file format)
- ``pipeline.edit``     make checked, atomic edits to that tree
- ``pipeline.run``      run builds (ninja) and tests (pytest)
- ``pipeline.results``  interpret JUnit results: outcomes, tables, xfail decisions
- ``pipeline.report``   render and publish (terminal, Markdown, JSON, GitHub)
- ``pipeline.commands`` one module per user-facing command
- ``pipeline.sandbox``  the bundled PyTorch-shaped tree and its simulated MPS backend
"""
