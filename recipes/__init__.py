"""The recipes a user runs by path (python recipes/icot_gpt2.py); a package so the tests import them as modules."""
