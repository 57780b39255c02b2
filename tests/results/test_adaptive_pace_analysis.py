"""results/adaptive_pace/make_results.py on run records whose crossings are known by design."""

from __future__ import annotations

import json
from pathlib import Path

import matplotlib.image
import pytest

from results.adaptive_pace import make_results

REPO = Path(__file__).resolve().parents[2]
BATCH = 64


def _write_run(root: Path, name: str, scores: list[float], gone_at: int | None, every: int = 10):
    """A record in the first runs' format: implicit EM ``scores`` every ``every`` steps, the CoT (4 tokens) gone from
    step ``gone_at`` on, the curriculum logged every 5 steps."""
    folder = root / name
    folder.mkdir(parents=True)
    log = []
    for step in range(5, every * len(scores) + 1, 5):
        kept = 0.0 if gone_at is not None and step >= gone_at else 4.0
        log.append({"step": step, "loss": 1.0, "cot/kept_tokens_mean": kept})
        if step % every == 0:
            log.append(
                {"step": step, "eval_implicit/answer_em": scores[step // every - 1], "train_examples": step * BATCH}
            )
    (folder / "training_log.json").write_text(json.dumps(log))
    (folder / "eval_results.json").write_text(
        json.dumps({"test/implicit/answer_em": scores[-1], "validation/implicit/answer_em": scores[-1]})
    )
    (folder / "run.json").write_text(json.dumps({"run": name, "command": f"python recipes/icot_gpt2.py # {name}"}))


@pytest.fixture
def records(tmp_path):
    runs = tmp_path / "runs"
    _write_run(runs, "mult_adaptive", [0.0, 0.5, 0.92, 0.995], gone_at=20)  # 90% at step 30, 99% at step 40
    _write_run(runs, "mult_adaptive_max500", [0.0, 0.0, 0.0, 0.91, 0.95], gone_at=20)  # 90% at 40: not the best
    _write_run(runs, "mult_fixed100", [0.0, 0.1, 0.2, 0.3, 0.4, 0.5], gone_at=40)  # never
    _write_run(runs, "mult_fixed200", [0.0, 0.0, 0.3, 0.6, 0.8, 0.9, 0.95, 0.97], gone_at=50)  # 90% at 60
    _write_run(runs, "mult_e2e", [0.0, 0.0], gone_at=None)
    _write_run(runs, "parity_adaptive", [0.5, 0.6], gone_at=10)  # reaches neither bar
    _write_run(runs, "parity_fixed300", [0.5, 1.0], gone_at=10)
    return tmp_path


def test_examples_to_each_bar_and_the_ratio_to_the_best_fixed_pace(records):
    summary = make_results.main(["--runs", str(records / "runs"), "--out", str(records / "out")])
    mult = summary["mult"]
    rows = {row["run"]: row for row in mult["runs"]}
    assert [row["run"] for row in mult["runs"]] == [
        "mult_adaptive", "mult_adaptive_max500", "mult_fixed100", "mult_fixed200", "mult_e2e"
    ]  # fmt: skip
    assert (
        rows["mult_adaptive"]["examples_to_0.9"] == 30 * BATCH
        and rows["mult_adaptive"]["examples_to_0.99"] == 40 * BATCH
    )
    assert rows["mult_fixed100"]["examples_to_0.9"] is None and rows["mult_fixed200"]["examples_to_0.9"] == 60 * BATCH
    assert rows["mult_adaptive"]["cot_gone_at"] == 20 * BATCH and rows["mult_e2e"]["cot_gone_at"] is None
    best = {"best_fixed": "mult_fixed200", "best_adaptive": "mult_adaptive", "ratio": 2.0, "ratio_at_least": None}
    assert mult["adaptive_vs_best_fixed"]["0.9"] == best
    # No fixed pace reached 99%: the ratio is bounded below by the smaller fixed budget (60 steps) over adaptive's 40.
    assert mult["adaptive_vs_best_fixed"]["0.99"] == {
        "best_fixed": None, "best_adaptive": "mult_adaptive", "ratio": None, "ratio_at_least": 1.5
    }  # fmt: skip
    assert summary["parity"]["adaptive_vs_best_fixed"]["0.9"]["ratio"] is None  # adaptive never got there

    table = (records / "out" / "table.md").read_text()
    assert (
        "| adaptive pace (answer-token accuracy), at most 2,000 steps / token | 1,280 | 1,920 | 2,560 | 0.995 |"
        in table
    )
    assert (
        "| adaptive pace (answer-token accuracy), at most 500 steps / token | 1,280 | 2,560 | not in 3,200 | 0.950 |"
        in table
    )
    assert "| fixed pace, 1 token / 100 steps | 2,560 | not in 3,840 | not in 3,840 |" in table
    assert (
        "the best fixed pace (mult_fixed200) needed 2.00× the examples of the best adaptive one (mult_adaptive)"
        in table
    )
    assert "≥ 90%: no adaptive pace reached it; parity_fixed300 did." in table
    assert "| end to end (no CoT ever) | — (no CoT) |" in table
    assert json.loads((records / "out" / "summary.json").read_text())["mult"]["runs"][0]["run"] == "mult_adaptive"
    for task in ("mult", "parity"):
        image = matplotlib.image.imread(records / "out" / f"curves_{task}.png")
        assert image.shape[0] > 400 and image.shape[1] > 600


def test_a_record_missing_a_file_is_named(records):
    (records / "runs" / "mult_e2e" / "eval_results.json").unlink()
    with pytest.raises(
        ValueError, match=r"run record .*mult_e2e lacks eval_results\.json; run it again through the harness\."
    ):
        make_results.main(["--runs", str(records / "runs"), "--out", str(records / "out")])
    with pytest.raises(ValueError, match="no run records under"):
        make_results.main(["--runs", str(records / "out"), "--out", str(records / "out2")])
