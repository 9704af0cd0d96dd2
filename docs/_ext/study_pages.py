"""Pages that include Markdown files of the repository where they lie: the case studies' READMEs, benchmark results.

``studies/<name>/index.md`` includes the README (its figures taken relative to it), and each Markdown file the
README links to (a results table) gets a page of its own beside it, at the same relative path, so the README's
links resolve. The pages are written at build time into a git-ignored folder of the docs: the READMEs, tables and
figures are never copied into git, and a new case study gets its page without an edit here. Each benchmark results
file (``benchmarks/results/*.md``, a case study's ``bench*.md``) gets one page likewise.
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

LOCAL_MARKDOWN_LINK = re.compile(r"\]\(((?![a-z]+:)[^)#\s]+\.md)(?:#[^)]*)?\)")
"""A Markdown link to a local ``.md`` file (not a URL)."""


def include_page(source: Path, page: Path, orphan: bool = False) -> str:
    """The Markdown of ``page``, which includes ``source`` (images relative to it)."""
    relative = Path(os.path.relpath(source, page.parent)).as_posix()
    front = "---\norphan: true\n---\n" if orphan else ""
    return f"{front}```{{include}} {relative}\n:relative-images:\n```\n"


def _write(page: Path, text: str) -> None:
    page.parent.mkdir(parents=True, exist_ok=True)
    if not page.exists() or page.read_text() != text:
        page.write_text(text)


def write(studies: Path, pages: Path) -> list[Path]:
    """Write the pages of every case study under ``studies`` into ``pages`` (pages of removed ones deleted).

    Returns
    -------
    list of Path
        The pages written, the READMEs' first, in name order.
    """
    readmes = sorted(studies.glob("*/README.md"))
    written = []
    for readme in readmes:
        folder = pages / readme.parent.name
        page = folder / "index.md"
        _write(page, include_page(readme, page))
        written.append(page)
        for link in sorted(set(LOCAL_MARKDOWN_LINK.findall(readme.read_text()))):
            target = (readme.parent / link).resolve()
            if target.is_file() and readme.parent.resolve() in target.parents:
                linked = folder / link
                _write(linked, include_page(target, linked, orphan=True))
                written.append(linked)
    _remove_stale(pages, written, {readme.parent.name for readme in readmes})
    return written


def write_benchmarks(sources: list[Path], pages: Path) -> list[Path]:
    """Write one page per benchmark results file of ``sources`` into ``pages``, named ``<folder>_<file>.md`` after
    the folder that holds it (``results`` of ``benchmarks/results`` left out), pages of removed files deleted."""
    pages.mkdir(parents=True, exist_ok=True)
    written = []
    for source in sorted(sources):
        folder = source.parent.parent.name if source.parent.name == "results" else source.parent.name
        page = pages / f"{folder}_{source.stem}.md"
        _write(page, include_page(source, page))
        written.append(page)
    _remove_stale(pages, written, set())
    return written


def _remove_stale(pages: Path, written: list[Path], kept: set[str]) -> None:
    for stale in pages.iterdir() if pages.exists() else ():
        if stale.is_dir() and stale.name not in kept:
            shutil.rmtree(stale)
    for stale in set(pages.rglob("*.md")) - set(written):
        stale.unlink()
