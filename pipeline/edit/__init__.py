"""Checked edits to a PyTorch tree.

Each editor module computes a :class:`~pipeline.edit.atomic.FileEdit` (before/after text)
with a pure function and verifies it by re-parsing ``after`` with the matching reader;
:func:`~pipeline.edit.atomic.apply_edits` is the only place that writes source files.
"""
