"""Coconut's and CODI's public model classes beside our latent losses (run.py)."""
