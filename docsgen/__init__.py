"""What the README shows, made from real runs (``python -m docsgen``; ``nox -s screenshots``).

Outside the wheel, like ``bench/``: it drives the installed tool as a user does.

- :mod:`docsgen.runs`: a demo checkout (``mps-pipeline demo``), its first and second
  ``migrate atan2`` and a few real nightlies of it, through the command line;
- :mod:`docsgen.browser`: headless Chromium (Debian's ``chromium``, driven by Playwright's
  Python client without downloading a browser of its own).
"""
