"""Sphinx configuration of the documentation site (``python -m litseg_nb docs`` builds it).

Sphinx with MyST-NB: the user guide is Markdown (MyST), the executed notebooks are rendered as they were
committed (``nb_execution_mode = "off"``: nothing is re-run while the site builds), and the API reference is
autodoc/autosummary over the reST docstrings the package already uses.
"""
from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from litseg_nb._version import __version__  # noqa: E402

project = "LitSeg notebooks"
author = "litseg_nb"
copyright = "the litseg_nb authors"
release = version = __version__

extensions = [
    "myst_nb",
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.napoleon",
    # MathJax 3 copied into the build (_static/mathjax): the notebooks' formulas render with no CDN
    "sphinx-mathjax-offline",
]
templates_path = ["_templates"]
exclude_patterns = ["_build", "**.ipynb_checkpoints", "Thumbs.db", ".DS_Store"]
source_suffix = {".rst": "restructuredtext", ".md": "myst-nb", ".ipynb": "myst-nb"}
root_doc = "index"

# the notebooks are shown as executed by the smoke run they were copied from
nb_execution_mode = "off"
nb_output_stderr = "show"
myst_enable_extensions = ["dollarmath", "amsmath", "colon_fence", "deflist"]
myst_heading_anchors = 4

# API reference: every module of litseg_nb, each documenting what it defines (not what it re-exports)
autosummary_generate = True
autosummary_imported_members = False
autodoc_default_options = {"members": True, "undoc-members": False, "show-inheritance": True,
                           "ignore-module-all": True}
autodoc_typehints = "description"
autodoc_member_order = "bysource"
# the module tree of the API page lists modules, not every function in them
toc_object_entries = False
# the docstrings' single-backquoted names (`~litseg_nb.api.segment`) are Python cross-references
default_role = "py:obj"
napoleon_google_docstring = False
napoleon_numpy_docstring = True

html_theme = "alabaster"
html_title = "LitSeg notebooks"
html_theme_options = {"description": "LitSeg and its baselines as notebooks over a thin package",
                      "fixed_sidebar": True, "page_width": "1200px", "sidebar_width": "260px"}
html_static_path: list[str] = []


def setup(app):
    """Module data whose value is long (the command table, prompt texts) is documented without its repr."""
    from sphinx.ext.autodoc import DataDocumenter
    from sphinx.util.inspect import object_description

    class ShortDataDocumenter(DataDocumenter):
        priority = DataDocumenter.priority + 1

        def should_suppress_value_header(self) -> bool:
            try:
                long = len(object_description(self.object)) > 300
            except ValueError:
                long = True
            return long or super().should_suppress_value_header()

    app.add_autodocumenter(ShortDataDocumenter, override=True)
