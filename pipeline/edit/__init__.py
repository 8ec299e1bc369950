"""Checked edits to a PyTorch tree.

Each editor module computes a :class:`~pipeline.edit.atomic.FileEdit` (before/after text)
with a pure function and verifies it by re-parsing ``after`` with the matching reader;
:func:`~pipeline.edit.transaction.commit` writes them: one all-or-nothing transaction per
edit stage, under the per-tree :func:`~pipeline.edit.transaction.tree_lock`.
"""
