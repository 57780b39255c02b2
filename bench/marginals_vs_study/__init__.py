"""The marginals study's own code beside our results/marginals/train.py (run.py)."""
