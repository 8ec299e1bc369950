"""The metal-kernel guide as a domain core: the checklist, which workflow applies, the backlog,
the edit plan, xfail decisions, and the stages of the migrate chain (declared once, in
``graph``). It reads the tree through ``pipeline.tree``, edits it through ``pipeline.edit``,
runs builds and tests through ``pipeline.run`` and judges them with ``pipeline.results``;
nothing here imports ``pipeline.commands``.
"""
