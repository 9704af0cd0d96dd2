"""The typed intermediate representation that backends and engines consume."""
