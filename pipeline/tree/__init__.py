"""Reading a PyTorch source tree.

One module per file format, all with the same module-level interface:

- ``PATTERNS``: tuple of globs, relative to the tree root, of the files the reader reads;
- ``parse(text, path)``: pure function from one file's text to frozen dataclasses that
  carry :class:`~pipeline.tree.span.Span` locations; raises
  :class:`~pipeline.errors.ParseError` naming file and line on malformed input;
- ``read(root)``: every matching file under ``root``; a missing file is a warning in the
  result's ``warnings``, never a crash.

``index`` joins the readers into one record per operator.
"""
