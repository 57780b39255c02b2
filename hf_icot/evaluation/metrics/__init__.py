"""Metrics shipped with hf_icot as ``evaluate`` modules, so they load offline by path.

``evaluate.load("exact_match")`` fetches the script from the Hub; ours lives in the installed package and is loaded
with ``evaluate.load(EXACT_MATCH_PATH)`` or :func:`load_exact_match`.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import evaluate

#: Folder of the exact-match metric script (``exact_match/exact_match.py``), inside the installed package.
EXACT_MATCH_PATH = str(Path(__file__).resolve().parent / "exact_match")


@functools.lru_cache(maxsize=1)
def load_exact_match() -> evaluate.EvaluationModule:
    """The shipped exact-match metric, loaded once per process (``evaluate.load`` copies and imports the script).

    ``compute(predictions=[...], references=[...], ignore_whitespace=True, ignore_case=False, return_matches=False)``
    returns ``{"exact_match": fraction}`` (plus ``"matches"``, 0/1 per pair, with ``return_matches=True``).
    """
    import evaluate  # here, not at the top: it loads scipy.stats; only a process that scores generations pays

    return evaluate.load(EXACT_MATCH_PATH)


__all__ = ["EXACT_MATCH_PATH", "load_exact_match"]
