"""The methods league study: every way to internalize a CoT on two tasks (README.md)."""
