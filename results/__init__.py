"""The studies, a package each: an analysis runs as python -m results.<study>.make_results from the repo root."""
