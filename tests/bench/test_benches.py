"""Every ``bench/*.py`` answers ``--help`` truthfully (its docstring's flags exist, every option says what it does)
and runs a tiny case that prints its table and its ratio. The figures of a tiny case mean nothing: the tests read
that they are printed and positive, never their size."""

from __future__ import annotations

import os
import re
import runpy
import sys
from pathlib import Path

import pytest

from tests import forked

REPO = Path(__file__).resolve().parents[2]
BENCHES = sorted(path for path in (REPO / "bench").glob("*.py") if path.name != "__init__.py")
NUMBER = r"[0-9][0-9,]*(?:\.[0-9]+)?"
#: The tiny case of each bench: a few examples, steps and repeats of a model a few units wide.
TINY = {
    "bench_build.py": ["--train-size", "64", "--repeat", "1"],
    "bench_causal_mask.py": ["--steps", "2"],
    "bench_dropout_draws.py": ["--steps", "2", "--n-layer", "1", "--n-embd", "16"],
    "bench_start_up.py": ["--repeat", "1"],
    "bench_collator.py": ["--rows", "200", "--repeat", "1"],
    "bench_inference.py": [
        "--a-digits", "2", "--b-digits", "2", "--n-examples", "8", "--batch-size", "8", "--repeats", "1",
        "--n-layer", "1", "--n-embd", "16", "--n-head", "2",
    ],
    "bench_trainer_overhead.py": [
        "--steps", "3", "--warmup", "1", "--repeats", "1", "--batch_size", "4", "--n_layer", "1", "--n_embd", "16",
    ],
    "bench_entry_points.py": ["--tiny"],
    "bench_gpu_icot.py": ["--dry-run"],  # on the CPU; its own test below
    "bench_latent_cost.py": ["--thoughts", "2,6", "--steps", "1", "--repeats", "1", "--batch-size", "4",
                             "--n-layer", "1", "--n-embd", "16"],
    "bench_quickstart.py": ["--tiny", "--threads", "1"],
    "bench_logits_memory.py": ["--vocab-size", "512", "--hidden-size", "8", "--n-layer", "1", "--batch-size", "4",
                               "--steps", "2"],
    "bench_vs_reference.py": [
        "--train-size", "64", "--max-steps", "4", "--warmup", "1", "--batch-size", "8", "--n-layer", "1",
        "--n-embd", "16", "--vocab-size", "512", "--log-every", "2",
        "--variants", "trainer,reference+vectorised,trainer+full_logits",
    ],
}  # fmt: skip


def run_bench(name: str, *args: str) -> str:
    """Run ``python bench/name ARGS`` from the repository root, on one thread, in a process of its own (forked from
    the session's pre-imported server: ``tests.forked``); its stdout. The processes a bench starts itself are fresh
    interpreters, as when a user runs it."""
    env = {**os.environ, "PYTHONPATH": str(REPO), "COLUMNS": "120"}  # COLUMNS: one help layout everywhere
    result = forked.run([f"bench/{name}", *args], env=env, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout


def number(text: str) -> float:
    return float(text.replace(",", ""))


def undocumented_options(help_text: str) -> list[str]:
    """Options of an argparse ``--help`` that print no description, neither beside them nor on the next line."""
    lines = help_text.split("\noptions:\n", 1)[1].splitlines()
    missing = []
    for index, line in enumerate(lines):
        option = re.match(r"  (-\S.*?)(?: {2,}\S.*)?$", line)
        if option is None:
            continue
        next_line = lines[index + 1] if index + 1 < len(lines) else ""
        described = line.rstrip() != f"  {option.group(1)}" or re.match(r" {6,}[^\s-]", next_line)
        if not described:
            missing.append(option.group(1))
    return missing


def test_every_bench_has_a_tiny_case() -> None:
    assert {path.name for path in BENCHES} == set(TINY)


#: Benches that import a sibling script (``bench/`` is on the path only when they run as scripts): their help runs as
#: a script (``run_bench``); the others' in this process, as ``python -m bench.<name>`` runs them.
SIBLING_IMPORTERS = {"bench_gpu_icot.py", "bench_quickstart.py"}


def help_of(path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> str:
    """``bench/<path> --help`` as its user reads it: printed, and the bench exits with status 0."""
    if path.name in SIBLING_IMPORTERS:
        return run_bench(path.name, "--help")
    monkeypatch.setenv("COLUMNS", "120")
    monkeypatch.setattr(sys, "argv", [f"bench/{path.name}", "--help"])
    with pytest.raises(SystemExit) as exited:
        runpy.run_module(f"bench.{path.stem}", run_name="__main__")
    assert exited.value.code in (0, None)
    return capsys.readouterr().out


@pytest.mark.parametrize("path", BENCHES, ids=lambda path: path.name)
def test_bench_answers_help_truthfully(path: Path, monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    text = help_of(path, monkeypatch, capsys)
    docstring = path.read_text(encoding="utf-8").split('"""')[1]
    assert docstring.splitlines()[0].rstrip(".?") in " ".join(text.split()), "the help opens with what it measures"
    commands = [line for line in docstring.splitlines() if f"bench/{path.name}" in line]
    assert commands, "the docstring shows how to run the bench"
    for flag in sorted({flag for line in commands for flag in re.findall(r"(?<![\w-])--[a-z][\w-]*", line)}):
        assert re.search(rf"{flag}\b", text), f"the docstring runs the bench with {flag}, which --help does not list"
    assert undocumented_options(text) == []


def test_bench_start_up_prints_cold_and_kept_answers_and_that_they_agree() -> None:
    out = run_bench("bench_start_up.py", *TINY["bench_start_up.py"])
    timed = re.findall(rf"({NUMBER})s +({NUMBER})s +({NUMBER})x +(True|False)$", out, re.MULTILINE)
    assert len(timed) == 2 and all(same == "True" for *_, same in timed), out
    assert "--help" in out and "bad input (no data)" in out


def test_bench_causal_mask_prints_both_ways_their_ratio_and_the_loss_difference() -> None:
    out = run_bench("bench_causal_mask.py", *TINY["bench_causal_mask.py"])
    row = re.search(rf"^median +({NUMBER})ms +({NUMBER})ms +({NUMBER})x +([0-9.e+-]+)$", out, re.MULTILINE)
    assert row and number(row.group(3)) > 0 and float(row.group(4)) <= 1e-6, out


def test_bench_dropout_draws_prints_the_four_ways_and_that_they_draw_the_same_numbers() -> None:
    out = run_bench("bench_dropout_draws.py", *TINY["bench_dropout_draws.py"])
    draws = re.search(r"GPT-2 1x16, .*batch 32 x (\d+) tokens, ([0-9,]+) dropout draws per step", out)
    assert draws, out
    # The embeddings' and the layer's two residual dropouts: (32, T, 16) each; the layer's attention: (32, 4, T, T).
    tokens = int(draws.group(1))
    assert int(draws.group(2).replace(",", "")) == 3 * 32 * tokens * 16 + 32 * 4 * tokens * tokens
    ways = "in the step", "helper thread", "kernel in step", "drawn before"
    rows = dict(re.findall(rf"^({'|'.join(ways)}) +{NUMBER}ms +({NUMBER})x$", out, re.M))
    assert set(rows) == set(ways) and number(rows["in the step"]) == 1.0
    assert "largest loss difference from torch's own draws: 0.00e+00" in out, "the same masks, so the same loss"
    lever = re.search(
        r"^the lever's log, helper thread: (\d+) training forwards drawn ahead by (the C kernel|torch) on a helper "
        r"thread, 0 put back$",
        out,
        re.M,
    )
    assert lever and int(lever.group(1)) >= 2, "the timed helper-thread steps run the lever itself"
    in_step = re.search(
        r"^the lever's log, kernel in step: (\d+) training forwards drawn by the C kernel in the step", out, re.M
    )
    assert in_step and int(in_step.group(1)) >= 2 or "no C kernel to draw with in the step" in out


def test_bench_build_prints_a_row_per_task() -> None:
    out = run_bench("bench_build.py", *TINY["bench_build.py"])
    rows = {line.split()[0]: line.split() for line in out.splitlines() if line.startswith(("mult", "parity", "count"))}
    assert set(rows) == {"multiplication", "parity", "counter"}
    for name, row in rows.items():
        examples, build_s, build_rate, parquet_s, parquet_rate, total_s = map(number, row[2:8])
        assert examples >= 64 and build_rate > 0 and parquet_rate > 0, name
        assert min(build_s, parquet_s, total_s) >= 0, name  # a tiny build can round to 0.00 s
    assert "bar:" not in out, "the 60 s bar is judged at the reference size only"


def test_bench_collator_prints_both_ways_of_preparing_and_rendering_and_that_they_agree() -> None:
    out = run_bench("bench_collator.py", *TINY["bench_collator.py"])
    timed = re.findall(rf"({NUMBER})s +({NUMBER})s +({NUMBER})x +(True|False)", out)
    assert len(timed) == 5 and all(same == "True" for *_, same in timed), out
    assert all(number(ratio) > 0 for _, _, ratio, _ in timed)
    assert "Log-ICoT stage 2 (levels, pad)" in out and "token by token, 5 removed (left, pad)" in out
    assert "GPT-2 BPE, reference format" in out and "GPT-2 BPE, hf_icot format" in out


def test_bench_latent_cost_prints_a_row_per_thought_count_with_its_ratios() -> None:
    out = run_bench("bench_latent_cost.py", *TINY["bench_latent_cost.py"])
    rows = [line for line in out.splitlines() if re.match(r"\| [0-9]+ \|", line)]
    assert [row.split(" | ")[1] for row in rows] == ["2 / 4", "6 / 4"]  # decoder passes for the thoughts
    for row in rows:
        ratios = re.findall(rf"({NUMBER})x", row)
        assert len(ratios) == 4 and all(number(ratio) > 0 for ratio in ratios)


def test_bench_inference_prints_both_modes_and_their_ratio() -> None:
    out = run_bench("bench_inference.py", *TINY["bench_inference.py"])
    rows = dict(re.findall(rf"^(implicit|explicit) +({NUMBER}) +{NUMBER} +{NUMBER}$", out, re.MULTILINE))
    assert int(rows["implicit"]) < int(rows["explicit"]), "implicit mode generates no CoT"
    ratio = re.search(rf"^implicit / explicit examples/s: ({NUMBER})x$", out, re.MULTILINE)
    assert ratio and number(ratio.group(1)) > 0
    ideal = re.search(rf"^ideal ratio \(explicit / implicit new tokens per example\): ({NUMBER})x$", out, re.MULTILINE)
    assert ideal and number(ideal.group(1)) == pytest.approx(int(rows["explicit"]) / int(rows["implicit"]), abs=0.01)


def test_bench_trainer_overhead_prints_each_repeat_and_the_median_ratios() -> None:
    out = run_bench("bench_trainer_overhead.py", *TINY["bench_trainer_overhead.py"])
    assert re.search(rf"^repeat 0: wall ex/s bare +{NUMBER} ICoTTrainer +{NUMBER} ratio {NUMBER} \|", out, re.M)
    median = re.search(rf"^median ratio ICoTTrainer / bare loop: wall ({NUMBER}), CPU time ({NUMBER})", out, re.M)
    assert median and number(median.group(1)) > 0 and number(median.group(2)) > 0


def test_bench_entry_points_runs_both_forms_and_prints_their_ratios(tmp_path: Path) -> None:
    out = run_bench("bench_entry_points.py", *TINY["bench_entry_points.py"], "--output_root", str(tmp_path))
    rows = {
        form: list(map(number, figures))
        for form, *figures in re.findall(
            rf"^(python|accelerate launch) +({NUMBER}) +({NUMBER}) +({NUMBER}) +({NUMBER})$", out, re.MULTILINE
        )
    }
    assert set(rows) == {"python", "accelerate launch"}
    for form, (wall_s, train_s, steps, steps_per_s) in rows.items():
        assert steps == 4 and wall_s > 0 and train_s > 0 and steps_per_s > 0, form
        assert (tmp_path / form.split()[0] / "model.safetensors").is_file(), "each form ran the recipe to the end"
    ratios = re.search(rf"^accelerate launch / python: steps/s ({NUMBER})x, wall time ({NUMBER})x$", out, re.M)
    assert ratios and number(ratios.group(1)) > 0 and number(ratios.group(2)) > 0


def test_bench_quickstart_runs_old_and_new_to_the_end_and_prints_times_accuracies_and_ratios(tmp_path: Path) -> None:
    out = run_bench("bench_quickstart.py", *TINY["bench_quickstart.py"], "--output_root", str(tmp_path))
    rows = {
        form: list(map(number, figures))
        for form, *figures in re.findall(
            rf"^(old|new) +({NUMBER}) +({NUMBER}) +(\d+)" + rf" +({NUMBER})" * 4 + "$", out, re.M
        )
    }
    assert set(rows) == {"old", "new"}
    for form, (wall_s, train_s, steps, steps_per_s, *accuracies) in rows.items():
        assert steps == 2 and wall_s > train_s > 0 and steps_per_s > 0 and all(0 <= a <= 1 for a in accuracies), form
        assert (tmp_path / form / "eval_results.json").is_file(), "each form ran the recipe to the end"
    assert '--task_args {"train_size": 38400} --num_train_epochs 8' in out, "the old form's flags are printed"
    ratios = re.search(rf"^old / new: wall time ({NUMBER})x, training time ({NUMBER})x$", out, re.M)
    assert ratios and number(ratios.group(1)) > 0 and number(ratios.group(2)) > 0


def test_bench_vs_reference_prints_every_variant_the_padding_per_stage_and_equal_results() -> None:
    out = run_bench("bench_vs_reference.py", *TINY["bench_vs_reference.py"])
    lengths = re.search(rf"full-CoT tokens per example: reference ({NUMBER}), ICoTTrainer ({NUMBER})", out)
    assert lengths and lengths.group(1) == lengths.group(2), "both loops train on the same token ids"
    found = re.findall(
        rf"^(reference|trainer|reference\+vectorised|trainer\+full_logits) +({NUMBER}) +({NUMBER}) +({NUMBER}) "
        rf"+({NUMBER}) +({NUMBER})  (.+)$",
        out,
        re.MULTILINE,
    )
    rows = {name: list(map(number, figures)) for name, *figures, _ in found}
    logits = {name: where for name, *_, where in found}
    assert set(rows) == {"reference", "trainer", "reference+vectorised", "trainer+full_logits"}
    for name, (steps_per_s, tokens_per_s, efficiency, rss, ratio) in rows.items():
        assert steps_per_s > 0 and tokens_per_s > 0 and 0 < efficiency <= 1 and rss > 0 and ratio > 0, name
    assert rows["reference"][4] == 1.0
    assert logits["trainer"] == "labelled (logits_to_keep)" and logits["trainer+full_logits"] == "every position"
    assert logits["reference"] == logits["reference+vectorised"] == "every position"
    stages = re.findall(rf"^  (reference|trainer) +((?:\d+:{NUMBER} ?)+)$", out, re.MULTILINE)
    assert {name for name, _ in stages} == {"reference", "trainer"}
    # 64 lines, batch 8: 8 steps per epoch, one token removed per step; 4 steps are counts 0-3.
    assert dict(stages)["reference"].split()[0].startswith("0:") and len(dict(stages)["reference"].split()) == 4
    for name in ("trainer", "reference+vectorised"):
        assert f"removal counts per step, {name} vs reference: identical" in out
    losses = dict(re.findall(r"^  (reference|trainer) +((?:[0-9.]+ ?)+)$", out.split("loss per", 1)[1], re.M))
    assert len(losses["reference"].split()) == len(losses["trainer"].split()) == 2


def test_gpu_bench_answers_help_and_its_cpu_dry_run_measures_both_loops_in_both_precisions() -> None:
    help_text = run_bench("bench_gpu_icot.py", "--help")
    assert "ICoT on one GPU" in help_text and undocumented_options(help_text) == []
    for flag in ("--dry-run", "--peak-tflops", "--max-batch", "--precisions", "--steps", "--warmup"):
        assert flag in help_text
    out = run_bench("bench_gpu_icot.py", "--dry-run")
    rows = re.findall(
        rf"^(bare loop|ICoTTrainer) +(fp32|bf16) +(\d+) +({NUMBER}) +({NUMBER}) +({NUMBER})% +({NUMBER})$", out, re.M
    )
    assert {(loop, precision) for loop, precision, *_ in rows} == {
        (loop, precision) for loop in ("bare loop", "ICoTTrainer") for precision in ("fp32", "bf16")
    }
    for _, _, batch, steps_per_s, tokens_per_s, mfu, peak in rows:
        assert int(batch) == 8, "the search doubles 4 -> 8, the dry run's largest batch"
        assert number(steps_per_s) > 0 and number(tokens_per_s) > 0 and number(mfu) >= 0 and number(peak) > 0
    assert len(re.findall(rf"^ICoTTrainer / bare loop \((fp32|bf16)\): {NUMBER}$", out, re.M)) == 2
    assert "MFU against 989 TFLOPs" in out


def test_bench_logits_memory_prints_both_variants_their_ratio_and_equal_losses() -> None:
    out = run_bench("bench_logits_memory.py", *TINY["bench_logits_memory.py"])
    rows = {
        name: (list(map(number, figures)), how)
        for name, *figures, how in re.findall(
            rf"^(every position|labelled only) +({NUMBER}) +({NUMBER}) +(-?{NUMBER})  (every position|\w+)$",
            out,
            re.MULTILINE,
        )
    }
    assert set(rows) == {"every position", "labelled only"}
    assert rows["every position"][1] == "every position" and rows["labelled only"][1] == "logits_to_keep"
    for name, ((start, peak, _), _) in rows.items():
        assert 0 < start <= peak, name
    ratio = re.search(rf"^memory the steps add, labelled only / every position: (-?{NUMBER})$", out, re.MULTILINE)
    assert ratio is not None
    losses = dict(re.findall(r"^  (every position|labelled only) +((?:[0-9.]+ ?)+)$", out, re.MULTILINE))
    assert len(losses["every position"].split()) == 2 and losses["every position"] == losses["labelled only"]


def test_bench_quickstart_previous_compares_with_the_settings_of_2026_12_02(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.syspath_prepend(str(REPO / "bench"))  # bench_quickstart imports its sibling bench_entry_points
    import bench_quickstart

    forms = bench_quickstart.commands(bench_quickstart.parse_args(["--previous"]), tmp_path)
    old, new = (
        forms[form][forms[form].index("--disable_tqdm") + 2 : forms[form].index("--output_dir")] for form in forms
    )
    assert old == ["--scratch_model", '{"initializer_range": 0.02}', "--pretrain_epochs", "2"] and new == []
    default = bench_quickstart.commands(bench_quickstart.parse_args([]), tmp_path)["old"]
    assert default[default.index("--pretrain_epochs") + 1] == "2" and '"initializer_range": 0.02' in " ".join(default)
