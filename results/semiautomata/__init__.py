"""The semiautomata study: its analysis and the README it writes from its templates (README.md)."""
