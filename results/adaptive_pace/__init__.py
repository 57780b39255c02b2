"""The adaptive-pace study: the adaptive schedule against fixed paces (README.md)."""
