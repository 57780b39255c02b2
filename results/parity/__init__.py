"""The parity study: its theory models (``theory/``), the mixture MLP's trainer (``mlp_trainer``), the training script
(``train``) and the analysis (README.md)."""
