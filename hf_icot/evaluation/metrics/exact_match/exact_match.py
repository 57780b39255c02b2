"""Exact match between predicted and reference strings, as an ``evaluate`` metric shipped with hf_icot.

The Hub's ``exact_match`` cannot be fetched offline, so hf_icot ships its own and loads it by path:
``evaluate.load(hf_icot.evaluation.metrics.EXACT_MATCH_PATH)``. Only the standard library, ``datasets`` and
``evaluate`` are imported here, because ``evaluate`` copies this file into its module cache and imports it from there.
"""

import re

import datasets
import evaluate

_DESCRIPTION = """\
The fraction of predictions that equal their reference string exactly, after optional normalisation: runs of
whitespace collapsed to one space and the ends stripped (`ignore_whitespace`, on by default, because generated answers
are rebuilt from tokens joined by spaces), and letter case ignored (`ignore_case`).
"""

_KWARGS_DESCRIPTION = """
Args:
    predictions (list of str): the predicted strings.
    references (list of str): the reference strings, one per prediction.
    ignore_whitespace (bool, default True): collapse runs of whitespace to one space and strip both ends first.
    ignore_case (bool, default False): compare lower-cased strings.
    return_matches (bool, default False): also return `matches`, a list with 1 where the pair matched and 0 where not.
Returns:
    exact_match (float): matching pairs divided by the number of pairs, in [0, 1].
    matches (list of int): only with `return_matches=True`.
Raises:
    ValueError: no predictions, or predictions and references of different lengths.
Examples:
    >>> metric = evaluate.load(hf_icot.evaluation.metrics.EXACT_MATCH_PATH)
    >>> metric.compute(predictions=["1 2  3", "4"], references=["1 2 3", "5"])
    {'exact_match': 0.5}
"""

_WHITESPACE = re.compile(r"\s+")


def _normalise(text: str, ignore_whitespace: bool, ignore_case: bool) -> str:
    if ignore_whitespace:
        text = _WHITESPACE.sub(" ", text).strip()
    if ignore_case:
        text = text.lower()
    return text


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS_DESCRIPTION)
class ExactMatch(evaluate.Metric):
    """Fraction of predictions equal to their reference (see the module docstring)."""

    def _info(self) -> evaluate.MetricInfo:
        return evaluate.MetricInfo(
            description=_DESCRIPTION,
            citation="",
            inputs_description=_KWARGS_DESCRIPTION,
            features=datasets.Features(
                {"predictions": datasets.Value("string"), "references": datasets.Value("string")}
            ),
        )

    def _compute(
        self,
        predictions: list[str],
        references: list[str],
        ignore_whitespace: bool = True,
        ignore_case: bool = False,
        return_matches: bool = False,
    ) -> dict:
        if len(predictions) != len(references):
            raise ValueError(
                f"exact_match got {len(predictions)} predictions and {len(references)} references; "
                "each prediction needs exactly one reference."
            )
        if not predictions:
            raise ValueError("exact_match got no predictions; pass at least one prediction and its reference.")
        matches = [
            int(_normalise(p, ignore_whitespace, ignore_case) == _normalise(r, ignore_whitespace, ignore_case))
            for p, r in zip(predictions, references)
        ]
        result: dict = {"exact_match": sum(matches) / len(matches)}
        if return_matches:
            result["matches"] = matches
        return result
