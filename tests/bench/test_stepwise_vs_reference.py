"""The pure readings of ``bench/stepwise_vs_reference/run.py`` (the reference's removal counts from its printed
increments, the loss windows, its command-line checks). The bench itself needs a checkout of the reference and minutes
of training, so it is never run here."""

from __future__ import annotations

import sys

import pytest

from bench.stepwise_vs_reference import run


def test_removal_counts_follow_the_reference_s_printed_increments() -> None:
    stdout = (
        "Epoch 0. Scheduled to remove: 0\n -epoch 0. step 3. removing: 1\n"
        "Step: 4. PPL: 9\n -epoch 0. step 6. removing: 2\n"
    )
    assert run.scheduled_removals(stdout, 8) == [0, 0, 0, 1, 1, 1, 2, 2]
    assert run.scheduled_removals("no increments", 3) == [0, 0, 0]


def test_loss_windows_are_means_of_whole_windows() -> None:
    assert run.windows([1.0] * 25 + [3.0] * 25 + [9.0] * 10) == [1.0, 3.0]


def test_a_folder_without_the_reference_script_is_refused(tmp_path) -> None:
    with pytest.raises(SystemExit):
        run.parse_args(["--reference-repo", str(tmp_path)])


def test_a_lever_side_takes_flag_equals_value(tmp_path, capsys) -> None:
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "train.py").write_text("")
    args = run.parse_args(["--reference-repo", str(tmp_path), "--lever-off", "fused_gelu=false"])
    assert args.lever_off == ["fused_gelu=false"]
    with pytest.raises(SystemExit):
        run.parse_args(["--reference-repo", str(tmp_path), "--lever-off", "fused_gelu"])
    assert "is not FLAG=VALUE" in capsys.readouterr().err


def test_a_lever_asked_for_is_on_every_side_of_ours_but_its_own_off_side(tmp_path, capsys) -> None:
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "train.py").write_text("")
    given = ["--lever", "draw_dropout_ahead=true", "--lever-off", "draw_dropout_ahead=false"]
    args = run.parse_args(["--reference-repo", str(tmp_path), *given])

    def recipe_flags(stage_eval: bool, lever: str = "") -> list[str]:
        command = run.ours_command(args, tmp_path, tmp_path / "out", tmp_path / "clock.json", stage_eval, lever)
        return command[5:]  # after python -c LAUNCHER clock recipe: what the launcher and the recipe read

    def lever(flags: list[str]) -> str:  # the value the recipe reads: a flag given twice takes its last one
        return flags[len(flags) - flags[::-1].index("--draw_dropout_ahead")]

    # The lever is on every side of ours but the one that turns it off.
    assert lever(recipe_flags(True)) == "true"
    assert lever(recipe_flags(False)) == "true"
    assert lever(recipe_flags(False, "draw_dropout_ahead=false")) == "false"
    with pytest.raises(SystemExit):
        run.parse_args(["--reference-repo", str(tmp_path), "--lever", "draw_dropout_ahead"])
    assert "--lever 'draw_dropout_ahead' is not FLAG=VALUE" in capsys.readouterr().err


def test_a_side_that_fails_is_named_by_its_log(tmp_path) -> None:
    log = tmp_path / "ours_eval_on.log"
    with pytest.raises(SystemExit, match=rf"^ours_eval_on failed; see {log}$"):
        run.run([sys.executable, "-c", "import sys; print('why', file=sys.stderr); sys.exit(3)"], log)
    assert log.read_text().endswith("--- stderr ---\nwhy\n"), "the side's output is kept"


def test_where_a_step_goes_is_printed_with_the_rest_as_the_remainder(capsys) -> None:
    assert run.differences([1.0, 1.5, 2.5]) == [0.5, 1.0]
    assert run.milliseconds([0.1, 0.3, 0.2]) == pytest.approx(200.0)
    ours = [{"step_ms": ms, "phases_ms": {"forward and backward": ms - 10, "clipping and optimizer": 4.0}}
            for ms in (150.0, 170.0, 160.0)]  # fmt: skip
    run.print_steps({"small": {"reference": [{"step_ms": 190.0, "phases_ms": {}}], "ours, stage eval off": ours}})
    lines = capsys.readouterr().out.splitlines()
    reference = next(line for line in lines if "reference" in line).split()
    assert reference[-1] == "190.0", "the reference's step only: its phases are not clocked"
    assert next(line for line in lines if "ours" in line).split()[-4:] == ["160.0", "150.0", "4.0", "6.0"]
