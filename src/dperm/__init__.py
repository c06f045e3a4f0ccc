"""dperm: differentially private empirical risk minimization."""

__version__ = "0.1.0"
