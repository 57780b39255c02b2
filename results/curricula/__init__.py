"""The curriculum league study: its table, curves and verdicts (README.md)."""
