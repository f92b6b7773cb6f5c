"""Sphinx configuration of fairque's documentation site.

Two extensions beyond Sphinx's own: myst-parser, so that the pages stay Markdown that
GitHub renders too (maintained by the Executable Books project, the usual way to read
Markdown in Sphinx), and sphinx.ext.autodoc (part of Sphinx) for the API
reference from the docstrings. The OpenAPI page is rendered by ``_ext/openapi_page.py``
(no third-party extension: the document's shape is known). Built in CI with warnings as
errors: ``uv run sphinx-build -W -q docs docs/_build``.
"""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE / "_ext"))
sys.path.insert(0, str(HERE.parent))

import openapi_page  # noqa: E402 - found through the path set above

openapi_page.write(HERE / "openapi.json", HERE / "_generated" / "http-api.md")

project = "fairque"
author = "fairque contributors"
extensions = ["myst_parser", "sphinx.ext.autodoc"]
source_suffix = {".md": "markdown", ".rst": "restructuredtext"}
exclude_patterns = ["_build"]
myst_heading_anchors = 3  # [text](client.md#tasks) links reach headings, as on GitHub
autodoc_member_order = "bysource"
autodoc_typehints = "description"
autodoc_default_options = {"members": True, "show-inheritance": True}
html_theme = "alabaster"
html_title = "fairque"
html_static_path: list[str] = []
suppress_warnings = ["myst.header"]  # each page starts at "#" and skips no level on GitHub
