"""The shipped exact-match metric loads offline by path and computes what its card says."""

from fnmatch import fnmatch
from pathlib import Path

import evaluate
import pytest

import hf_icot
from hf_icot.evaluation.metrics import EXACT_MATCH_PATH, load_exact_match


def test_loads_offline_by_path_and_counts_matches():
    metric = evaluate.load(EXACT_MATCH_PATH)
    result = metric.compute(predictions=["1 2 3", "4 5", "6", "7"], references=["1 2 3", "4 6", "6", "8"])
    assert result == {"exact_match": 0.5}


def test_whitespace_runs_are_normalised_by_default_and_can_count():
    metric = load_exact_match()
    predictions, references = ["  1   2 3 ", "a\tb"], ["1 2 3", "a b"]
    assert metric.compute(predictions=predictions, references=references)["exact_match"] == 1.0
    strict = metric.compute(predictions=predictions, references=references, ignore_whitespace=False)
    assert strict["exact_match"] == 0.0


def test_case_option_and_per_pair_matches():
    metric = load_exact_match()
    result = metric.compute(
        predictions=["Yes", "no", "maybe"], references=["yes", "no", "never"], ignore_case=True, return_matches=True
    )
    assert result["matches"] == [1, 1, 0]
    assert result["exact_match"] == pytest.approx(2 / 3)
    assert metric.compute(predictions=["Yes"], references=["yes"])["exact_match"] == 0.0


def test_no_predictions_is_refused_with_a_clear_message():
    with pytest.raises(ValueError, match="got no predictions"):
        load_exact_match().compute(predictions=[], references=[])


def test_metric_script_is_package_data_of_the_installed_package():
    tomllib = pytest.importorskip("tomllib")  # standard library from Python 3.11
    script = Path(EXACT_MATCH_PATH) / "exact_match.py"
    assert script.is_file()
    package_root = Path(hf_icot.__file__).parent
    relative = script.relative_to(package_root).as_posix()
    pyproject = Path(__file__).resolve().parents[2] / "pyproject.toml"
    patterns = tomllib.loads(pyproject.read_text())["tool"]["setuptools"]["package-data"]["hf_icot"]
    assert any(fnmatch(relative, pattern) for pattern in patterns), (relative, patterns)
