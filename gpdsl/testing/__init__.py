"""Testing utilities: simulation-based calibration."""
