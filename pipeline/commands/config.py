"""`config [--json]`: every setting, its value and where it came from.

Like `git config --show-origin` / `pip config list`: a default, a config file's path, an
environment variable's name, or a flag.
"""

from __future__ import annotations

import argparse
import json
import sys

from pipeline.config import SECRET_SETTINGS, TYPES, Resolved, Settings
from pipeline.options import JSON
from pipeline.redact import redact

# listing the settings must work on any root, a wrong one included: it is how you find out
PREPARES_TREE = False
SCHEMA = 1


def add_arguments(parser: argparse.ArgumentParser) -> None:
    JSON.add_to(parser)


def run(args: argparse.Namespace, settings: Settings) -> int:
    """Print the resolved settings; exit 0."""
    listed = {key: _shown(key, settings.sources[key]) for key in TYPES}
    if args.json:
        out = {
            "schema": SCHEMA,
            "settings": {k: {"value": s.value, "origin": s.origin} for k, s in listed.items()},
            "warnings": list(settings.warnings),
        }
        print(json.dumps(out, indent=2))
        return 0
    print(settings.root_line(), file=sys.stderr)  # where every command says it
    print(f"config file: {settings.config_file or 'none'}")
    width = max(map(len, listed))
    for key, source in listed.items():
        print(f"{key:<{width}}  {json.dumps(source.value)}  ({source.origin})")
    for warning in settings.warnings:
        print(f"warning: {warning}")
    return 0


def _shown(key: str, source: Resolved) -> Resolved:
    """``source`` as it may be printed: a secret setting's value redacted."""
    if key in SECRET_SETTINGS and isinstance(source.value, str):
        return Resolved(redact(source.value), source.origin)
    return source
