"""Where each mirrored benchmark file comes from: a GitHub repository, a commit, a path and a sha256.

The table, transcribed from the mirror's SOURCES.md, is ``github_sources.csv`` beside this module:
one row per file with the columns ``folder, repo, file, path, commit, size, sha256``. Every file is
reachable at ``https://raw.githubusercontent.com/<repo>/<commit>/<path>``.
"""

from __future__ import annotations

import csv
import importlib.resources
from dataclasses import dataclass

TABLE = "github_sources.csv"


@dataclass(frozen=True)
class GitHubSource:
    """The files of one dataset folder, all from one GitHub repository.

    Parameters
    ----------
    repo : str
        ``owner/name`` of the repository.
    files : tuple of tuple
        One ``(file_name, path_in_repo, commit, size_in_bytes, sha256)`` row per file.
    """

    repo: str
    files: tuple[tuple[str, str, str, int, str], ...]


def read_github_sources(text: str) -> dict[str, GitHubSource]:
    """Group the rows of a sources table by dataset folder, in the table's order.

    Parameters
    ----------
    text : str
        CSV with a header row naming the columns ``folder, repo, file, path, commit, size, sha256``.

    Returns
    -------
    dict of str to GitHubSource
        One source per folder.

    Raises
    ------
    ValueError
        If one folder's rows name different repositories.
    """
    repos: dict[str, str] = {}
    files: dict[str, list[tuple[str, str, str, int, str]]] = {}
    for row in csv.DictReader(text.splitlines()):
        folder = row["folder"]
        if repos.setdefault(folder, row["repo"]) != row["repo"]:
            raise ValueError(f"folder {folder!r} has files from {repos[folder]} and {row['repo']}")
        files.setdefault(folder, []).append(
            (row["file"], row["path"], row["commit"], int(row["size"]), row["sha256"])
        )
    return {folder: GitHubSource(repo=repos[folder], files=tuple(rows)) for folder, rows in files.items()}


GITHUB_SOURCES: dict[str, GitHubSource] = read_github_sources(
    importlib.resources.files(__package__).joinpath(TABLE).read_text(encoding="utf-8")
)
