"""One view per model family: what its engines receive."""
