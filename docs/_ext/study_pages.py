"""The case studies' pages: small pages that include each ``case_studies/<name>/README.md`` where it lies.

``studies/<name>/index.md`` includes the README (its figures taken relative to it), and each Markdown file the
README links to (a results table) gets a page of its own beside it, at the same relative path, so the README's
links resolve. The pages are written at build time into a git-ignored folder of the docs: the READMEs, tables and
figures are never copied into git, and a new case study gets its page without an edit here.
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
    kept = {readme.parent.name for readme in readmes}
    for stale in pages.iterdir() if pages.exists() else ():
        if stale.is_dir() and stale.name not in kept:
            shutil.rmtree(stale)
    for stale in set(pages.rglob("*.md")) - set(written):
        stale.unlink()
    return written
