"""Gaussian approximations of p(f | y, theta): Laplace and expectation propagation."""
