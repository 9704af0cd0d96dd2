"""Sphinx directives that put the generated reference (:mod:`gpdsl_reference`) into pages.

``.. gpdsl-catalogue:: kernels`` (or ``likelihoods``, ``priors``, ``functions``) and ``.. gpdsl-methods::`` are
replaced by the text :mod:`gpdsl_reference` writes from gpdsl's tables when the page is read, so the pages are
rebuilt from the tables on every build.
"""

from __future__ import annotations

from docutils import nodes
from docutils.statemachine import StringList
from sphinx.util.docutils import SphinxDirective
from sphinx.util.nodes import nested_parse_with_titles

import gpdsl_reference


class _GeneratedText(SphinxDirective):
    """A directive whose content is reStructuredText generated from gpdsl's tables (its ``generated()``)."""

    def run(self) -> list[nodes.Node]:
        container = nodes.section() if self.name != "gpdsl-catalogue" else nodes.container()
        lines = StringList(self.generated().splitlines(), source=f"<{self.name} {' '.join(self.arguments)}>")
        nested_parse_with_titles(self.state, lines, container)
        return container.children


class CatalogueDirective(_GeneratedText):
    """``.. gpdsl-catalogue:: KIND``: the table of kernels, likelihoods, priors or functions."""

    required_arguments = 1

    def generated(self) -> str:
        kind = self.arguments[0]
        if kind not in gpdsl_reference.CATALOGUES:
            raise self.error(f"gpdsl-catalogue: unknown table '{kind}'; one of {', '.join(gpdsl_reference.CATALOGUES)}")
        return gpdsl_reference.catalogue_rst(kind)


class MethodsDirective(_GeneratedText):
    """``.. gpdsl-methods::``: one section per method of the registry."""

    def generated(self) -> str:
        return gpdsl_reference.methods_rst()


class CommandLineDirective(_GeneratedText):
    """``.. gpdsl-cli::``: one section per command of ``gpdsl``, from its argparse parser."""

    def generated(self) -> str:
        return gpdsl_reference.cli_rst()


def setup(app):
    app.add_directive("gpdsl-catalogue", CatalogueDirective)
    app.add_directive("gpdsl-methods", MethodsDirective)
    app.add_directive("gpdsl-cli", CommandLineDirective)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
