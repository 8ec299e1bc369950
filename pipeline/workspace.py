"""Make the tree the settings name ready to work on: the step between loading and working.

:func:`pipeline.config.load_settings` only reads configuration; this is where the bundled
sandbox's working copy is created, so every command and doit task goes through here once.
"""

from __future__ import annotations

from pipeline.config import Settings
from pipeline.errors import ConfigError
from pipeline.tree import paths


def prepare(settings: Settings) -> Settings:
    """Create the sandbox's working copy when the settings select it; return the settings.

    Raises ConfigError when ``root`` is not a PyTorch tree: every reader would otherwise
    find nothing and report an operator as done.
    """
    if settings.is_sandbox:
        from pipeline import sandbox  # only the sandbox needs it

        sandbox.materialize(settings.root)
    elif not (settings.root / paths.NATIVE_YAML).is_file():
        raise ConfigError(
            f"root={settings.root} is not a PyTorch checkout (no {paths.NATIVE_YAML}); "
            "point root= at one, or leave it unset for the bundled sandbox"
        )
    return settings
