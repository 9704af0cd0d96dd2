"""Sphinx configuration of gpdsl's documentation site (``make docs``; docs/README.md says why this stack)."""

from __future__ import annotations

import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parent
ROOT = DOCS.parent
sys.path[:0] = [str(DOCS / "_ext"), str(ROOT)]

import gpdsl  # noqa: E402
import study_pages  # noqa: E402

project = "gpdsl"
author = "the gpdsl authors"
copyright = "gpdsl authors"
release = version = gpdsl.__version__

extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",
    "sphinx.ext.mathjax",
    "gpdsl_sphinx",
    "sphinx_gallery.gen_gallery",
]

source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build", "README.md", "_ext", "validation/*.json", "examples"]
# A page may go from its title to a level-3 heading (docs/inference.md does); nothing else is silenced.
suppress_warnings = ["myst.header"]

myst_enable_extensions = ["colon_fence", "deflist"]
myst_heading_anchors = 4

autodoc_member_order = "bysource"
autodoc_typehints = "description"
autodoc_default_options = {"members": True, "show-inheritance": False}
napoleon_google_docstring = False
napoleon_numpy_docstring = True
napoleon_use_ivar = True
napoleon_use_rtype = False

html_theme = "pydata_sphinx_theme"
html_title = f"gpdsl {version}"
html_static_path = []
html_theme_options = {
    "navigation_with_keys": False,
    "header_links_before_dropdown": 6,
    "show_toc_level": 2,
    "secondary_sidebar_items": ["page-toc"],
    "footer_start": ["copyright"],
    "footer_end": ["sphinx-version"],
}

# The gallery: docs/examples/plot_*.py, executed (make docs; GALLERY=0 builds the pages without running them). An
# example that raises fails the build.
sphinx_gallery_conf = {
    "examples_dirs": "examples",
    "gallery_dirs": "gallery",
    "filename_pattern": r"/plot_",
    "example_extensions": {".py"},
    "within_subsection_order": "FileNameSortKey",
    "abort_on_example_error": True,
    "only_warn_on_example_error": False,
    "remove_config_comments": True,
    "download_all_examples": False,
    "capture_repr": ("_repr_html_", "__repr__"),
}

# One page per case study: its README, included where it lies (figures and links relative to it).
study_pages.write(ROOT / "case_studies", DOCS / "studies")
# One page per benchmark results file: the benchmarks' and the case studies' engine-against-NUTS tables.
study_pages.write_benchmarks([*ROOT.glob("benchmarks/results/*.md"), *ROOT.glob("case_studies/*/bench*.md")],
                             DOCS / "benchmark_results")
