"""The marginals study: the K-fold ambiguity task, its training script and analysis (README.md)."""
