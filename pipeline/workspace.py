"""Make the tree the settings name ready to work on: the step between loading and working.

:func:`pipeline.config.load_settings` only reads configuration; this is where the bundled
sandbox's working copy is created, so every command and doit task goes through here once.
"""

from __future__ import annotations

from pipeline.config import Settings


def prepare(settings: Settings) -> Settings:
    """Create the sandbox's working copy when the settings select it; return the settings."""
    if settings.is_sandbox:
        from pipeline import sandbox  # only the sandbox needs it

        sandbox.materialize(settings.root)
    return settings
