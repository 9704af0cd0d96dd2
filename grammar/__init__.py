"""The gpdsl grammar (package data)."""
