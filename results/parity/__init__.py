"""The parity study: the theory models' training script and analysis (README.md)."""
