"""Mutated model files for the fuzz tests: shipped models with tokens deleted, duplicated or swapped, random
characters inserted, or the text truncated, drawn from a seeded generator (the same files on every run)."""

from __future__ import annotations

import random
import re
from pathlib import Path

MODELS = Path(__file__).resolve().parents[2] / "models"
TOKEN = re.compile(r"\s+|[A-Za-z_]\w*|\d+(?:\.\d*)?(?:[eE][+-]?\d+)?|//[^\n]*|\"[^\"\n]*\"|.", re.S)
CHARACTERS = "{}[]()<>;:,.=~+-*/^|&!?'\"#\\_ \n\t0123456789eEaxNQ\u00e9\u2028\x00"
KINDS = ("delete", "duplicate", "swap", "insert", "truncate", "splice")


def tokens(text: str) -> list[str]:
    """The text cut into identifiers, numbers, comments, strings, runs of white space and single characters."""
    return TOKEN.findall(text)


def mutate(text: str, rng: random.Random, edits: int = 1) -> str:
    """``text`` after ``edits`` random edits, each of one of :data:`KINDS`."""
    for _ in range(edits):
        parts = tokens(text) or [""]
        kind = rng.choice(KINDS)
        i = rng.randrange(len(parts))
        if kind == "delete":
            del parts[i]
        elif kind == "duplicate":
            parts.insert(i, parts[i] * rng.choice((1, 2, 50)))
        elif kind == "swap" and len(parts) > 1:
            j = rng.randrange(len(parts))
            parts[i], parts[j] = parts[j], parts[i]
        elif kind == "insert":
            parts.insert(i, "".join(rng.choice(CHARACTERS) for _ in range(rng.randint(1, 3))))
        elif kind == "truncate":
            parts = parts[:i]
        elif kind == "splice":
            j = rng.randrange(len(parts))
            parts[i:i] = parts[j:j + rng.randint(1, 20)]
        text = "".join(parts)
    return text


def mutants(count: int, seed: int = 40) -> list[tuple[str, str]]:
    """``count`` mutated models, ``(name, text)``, the same for the same ``count`` and ``seed``."""
    rng = random.Random(seed)
    sources = sorted(MODELS.glob("*.gpm"))
    found = []
    for number in range(count):
        source = sources[number % len(sources)]
        text = mutate(source.read_text(), rng, edits=rng.choice((1, 1, 2, 3, 8)))
        found.append((f"{source.stem}_{number}", text))
    return found
