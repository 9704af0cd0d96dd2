"""Predictions per model family."""
