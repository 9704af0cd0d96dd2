"""Stan function chunks and block templates (package data)."""
