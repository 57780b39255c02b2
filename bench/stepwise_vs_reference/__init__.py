"""The stepwise-ICoT reference's training loop beside our recipe (run.py)."""
