"""The marginals study's own code beside our recipe on one point: τ and the plateau of each, and their models.

    git clone https://github.com/mihirs-0/synass-lens /work/synass-lens    # the study's code, outside this repository
    nohup nice -n 5 python bench/marginals_vs_study/run.py --study-repo /work/synass-lens > /tmp/sbs.log 2>&1 &
    python bench/marginals_vs_study/run.py --study-repo /work/synass-lens --reuse-our-record   # our side: the record

Stages, each skipped when its outputs are already in --work-dir (so a rerun only prints the table again):

1. a virtual environment of the study's own (--venv): torch==2.13.0 first, then ``requirements.txt`` beside this
   file (the study's requirements, with transformer-lens < 4);
2. the study's ``scripts/train.py`` at K, n_b, seed and our ``marginals_study_schedule.yaml`` (lr, batch, weight
   decay, warm-up, max_steps; its trainer always clips at 1.0 and decays by cosine), a checkpoint every
   --checkpoint-every steps; its trainer has no early stop, so this script ends it once the checkpoint at --stop-step
   is written (and deletes each checkpoint's optimizer state, which the evaluation never reads, unless
   --keep-optimizer-states);
3. the study's ``scripts/run_candidate_eval.py`` on every checkpoint, once per --n-examples value (its default is 32
   bases), and its rules: τ = the first checkpoint whose candidate loss is below 0.5 log K, the plateau = its
   ``candidate_loss_plateau_avg`` (the mean candidate loss before its z-gap binding onset);
4. our ``results/marginals/train.py`` with ``marginals_study_schedule.yaml`` as ``results/marginals/runs.yaml``'s
   ``cos_k10_nb200_lr1e-3_bs128`` entry calls it, or with --reuse-our-record that run's committed record.

Both sides are then read by both rules (the study's, and ours: the crossing interpolated, the plateau the median over
0.25-0.75 τ) and printed as one table, with the parameters and the initial weight scale of each model, the
training speed and the wall time; ``side_by_side.md``, ``side_by_side.png`` (the candidate-loss curves) and
``summary.json`` in --work-dir keep them. Every training
runs one at a time with --threads torch threads under ``nice -n --nice``.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
SCHEDULE_CONFIG = REPO / "results" / "marginals" / "configs" / "marginals_study_schedule.yaml"
RECORDS = REPO / "results" / "marginals" / "runs"

#: the parameter kinds of both models, by a substring of each one's parameter names (TransformerLens, GPT-2)
STUDY_KINDS = {
    "token embedding": ("embed.W_E",),
    "positions": ("pos_embed.W_pos",),
    "attention in (Q, K, V)": (".attn.W_Q", ".attn.W_K", ".attn.W_V"),
    "attention out": (".attn.W_O",),
    "MLP in": (".mlp.W_in",),
    "MLP out": (".mlp.W_out",),
    "unembedding": ("unembed.W_U",),
}
OUR_KINDS = {
    "token embedding": ("transformer.wte.",),
    "positions": ("transformer.wpe.",),
    "attention in (Q, K, V)": ("attn.c_attn.weight",),
    "attention out": ("attn.c_proj.weight",),
    "MLP in": ("mlp.c_fc.weight",),
    "MLP out": ("mlp.c_proj.weight",),
    "unembedding": ("lm_head.weight",),
}

#: run in the study's virtual environment from its checkout: its model at a run's config, parameter by parameter. The
#: checkout is not ours and not installable (its scripts import ``src`` from the checkout's root), hence the path line.
STUDY_MODEL_PROBE = """
import json, sys
sys.path.insert(0, ".")
from omegaconf import OmegaConf
from src.data import create_tokenizer_from_config
from src.model import create_model_from_config
cfg = OmegaConf.load(sys.argv[1])
tokenizer = create_tokenizer_from_config(cfg)
model = create_model_from_config(cfg, tokenizer)
print(json.dumps({"vocab": tokenizer.vocab_size, "parameters": {
    name: [p.numel(), float(p.detach().double().pow(2).mean().sqrt())] for name, p in model.named_parameters()}}))
"""


# ----------------------------------------------------------------------------------------------- pure helpers


def study_overrides(k: int, n_bases: int, seed: int, schedule: dict, checkpoint_every: int, name: str,
                    base_dir: Path) -> list[str]:  # fmt: skip
    """Hydra overrides of the study's ``configs/base.yaml`` for (B, z) -> A at this point and schedule.

    Its experiment configs' ``defaults: ../base`` does not compose, so the run starts from ``base`` itself. The K-sweep
    launcher's choices are kept: distinct first target characters for bz_to_a, no probe split; the z-shuffle log
    (``eval_every``) runs as often as the checkpoints, as in that launcher."""
    return [
        f"experiment.name={name}", f"experiment.seed={seed}", "data.task=bz_to_a", f"data.k={k}",
        f"data.n_unique_b={n_bases}", "data.enforce_unique_a_first_char_per_b=true", "data.probe_fraction=0.0",
        f"training.batch_size={schedule['batch_size']}", f"training.learning_rate={schedule['learning_rate']}",
        f"training.weight_decay={schedule['weight_decay']}", f"training.warmup_steps={schedule['warmup_steps']}",
        f"training.max_steps={schedule['max_steps']}", f"training.checkpoint_every={checkpoint_every}",
        f"training.eval_every={checkpoint_every}", f"output.base_dir={base_dir}",
        f"hydra.run.dir={base_dir / name / 'hydra'}",
    ]  # fmt: skip


def our_command(k: int, n_bases: int, seed: int, output_dir: Path) -> list[str]:
    """Our recipe's command at this point, as ``runs.yaml``'s ``cos_k10_nb200_lr1e-3_bs128`` entry gives it."""
    task = json.dumps({"direction": "bz_to_a", "k": k, "n_bases": n_bases, "seed": seed})
    return [
        sys.executable, "results/marginals/train.py", "--config", str(SCHEDULE_CONFIG.relative_to(REPO)),
        "--disable_tqdm", "true", "--task_args", task, "--stop_after_tau", "1.0", "--diagnostics_interval", "10",
        "--logging_steps", "10", "--seed", str(seed), "--output_dir", str(output_dir),
    ]  # fmt: skip


def first_below(steps, values, threshold: float) -> float | None:
    """The study's τ: the first step whose value is below ``threshold`` (None if none is)."""
    return next((float(s) for s, v in zip(steps, values) if v < threshold), None)


def binding_onset(steps, gaps, threshold: float = 0.5, consecutive: int = 3) -> float | None:
    """The study's binding onset: the first step of the first run of ``consecutive`` z-gaps above ``threshold``."""
    run = 0
    for index, gap in enumerate(gaps):
        run = run + 1 if gap > threshold else 0
        if run == consecutive:
            return float(steps[index - consecutive + 1])
    return None


def plateau_before_onset(steps, values, onset: float | None) -> float | None:
    """The study's plateau: the mean of ``values`` before ``onset`` (all of them without one; the first value when
    the onset is the first step)."""
    before = [v for s, v in zip(steps, values) if onset is None or s < onset]
    if not values:
        return None
    return sum(before) / len(before) if before else float(values[0])


def plateau_window(steps, values, tau: float | None) -> float | None:
    """Our plateau (results/marginals C1, :func:`hf_icot.studies.report.plateau_median`): the median over 0.25-0.75
    τ."""
    from hf_icot.studies.report import plateau_median

    return plateau_median(steps, values, tau) if tau else None


def weight_scales(parameters: dict[str, list[float]], kinds: dict[str, tuple[str, ...]]) -> dict[str, float]:
    """Per parameter kind, the root-mean-square of its weights, pooled over the parameters whose name contains one
    of the kind's substrings; ``parameters`` maps a name to ``[numel, rms]``."""
    scales = {}
    for kind, keys in kinds.items():
        chosen = [(n, rms) for name, (n, rms) in parameters.items() if any(key in name for key in keys)]
        if chosen:
            scales[kind] = math.sqrt(sum(n * rms**2 for n, rms in chosen) / sum(n for n, _ in chosen))
    return scales


def checkpoint_steps(folder: Path) -> list[int]:
    """The steps of the study's complete checkpoints under ``folder`` (its ``metadata.json`` is written last)."""
    return sorted(int(d.name.split("_")[1]) for d in folder.glob("step_*") if (d / "metadata.json").exists())


def markdown(rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(rows[0]) + " |", "|" + "---|" * len(rows[0])]
    return "\n".join(lines + ["| " + " | ".join(row) + " |" for row in rows[1:]])


def fmt(value, digits: int = 1) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "—"
    if isinstance(value, str):
        return value
    if isinstance(value, int):
        return f"{value:,}"
    return f"{value:,.{digits}f}"


# ------------------------------------------------------------------------------------------------------ stages


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", flush=True)


def thread_env(threads: int) -> dict[str, str]:
    return {**os.environ, "OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads), "HF_HUB_OFFLINE": "1"}


def ensure_venv(venv: Path) -> Path:
    """The study's virtual environment's python, made and filled first if it cannot import the study's stack."""
    python = venv / "bin" / "python"
    probe = [str(python), "-c", "import torch, transformer_lens, hydra, omegaconf, yaml, einops"]
    if python.exists() and subprocess.run(probe, capture_output=True).returncode == 0:
        log(f"venv {venv}: ready, reused")
        return python
    log(f"venv {venv}: creating it and installing the study's dependencies")
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    pip = [str(python), "-m", "pip", "install"]
    subprocess.run([*pip, "torch==2.13.0"], check=True)  # first: an unpinned torch may pull a CUDA build
    subprocess.run([*pip, "-r", str(HERE / "requirements.txt")], check=True)
    subprocess.run(probe, check=True)
    return python


def train_study(python: Path, study_repo: Path, overrides: list[str], run_dir: Path, stop_step: int,
                keep_optimizer: bool, threads: int, nice: int) -> dict:  # fmt: skip
    """Run the study's trainer until its checkpoint at ``stop_step`` exists, then end it; returns the timing."""
    checkpoints = run_dir / "checkpoints"
    if stop_step in checkpoint_steps(checkpoints):
        log(f"study training: checkpoint {stop_step} is in {checkpoints}, reused")
        timing = run_dir / "timing.json"
        return (
            json.loads(timing.read_text())
            if timing.exists()
            else {"wall_s": None, "steps_per_s": None, "last_checkpoint": stop_step}
        )
    if run_dir.exists():  # its trainer cannot resume: an unfinished run starts over
        log(f"study training: {run_dir} has no checkpoint at step {stop_step}; removing it and starting over")
        shutil.rmtree(run_dir)
    run_dir.mkdir(parents=True)
    command = ["nice", "-n", str(nice), str(python), "scripts/train.py", "--config-path", "../configs",
               "--config-name", "base", *overrides]  # fmt: skip
    (run_dir / "command.txt").write_text(" ".join(command) + "\n")
    log(f"study training: {' '.join(command[3:])}")
    start = time.time()
    with open(run_dir / "train.log", "w") as stream:
        process = subprocess.Popen(command, cwd=study_repo, stdout=stream, stderr=subprocess.STDOUT,
                                   env=thread_env(threads), start_new_session=True)  # fmt: skip
        try:
            while process.poll() is None:
                time.sleep(2)
                done = checkpoint_steps(checkpoints)
                if not keep_optimizer:
                    for step in done:
                        (checkpoints / f"step_{step:06d}" / "optimizer.pt").unlink(missing_ok=True)
                if done and done[-1] >= stop_step:
                    os.killpg(process.pid, signal.SIGTERM)
                    process.wait(timeout=60)
        finally:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)
    wall = time.time() - start
    done = checkpoint_steps(checkpoints)
    if not done or done[-1] < stop_step:
        tail = (run_dir / "train.log").read_text()[-2000:]
        raise SystemExit(f"error: the study's trainer stopped before step {stop_step}; its log ends:\n{tail}")
    first, last = (checkpoints / f"step_{s:06d}" / "metadata.json" for s in (done[0], done[-1]))
    rate = (done[-1] - done[0]) / max(last.stat().st_mtime - first.stat().st_mtime, 1e-9)
    timing = {"wall_s": round(wall, 1), "steps_per_s": round(rate, 2), "last_checkpoint": done[-1]}
    (run_dir / "timing.json").write_text(json.dumps(timing, indent=2))
    log(f"study training: ended at checkpoint {done[-1]} after {wall:.0f} s, {rate:.2f} steps/s between checkpoints")
    return timing


def evaluate_study(python: Path, study_repo: Path, base_dir: Path, name: str, n_examples: int, threads: int,
                   nice: int) -> dict:  # fmt: skip
    """The study's candidate evaluation of every checkpoint on ``n_examples`` bases; its results file, kept."""
    kept = base_dir / name / f"candidate_eval_n{n_examples}.json"
    if kept.exists():
        log(f"study evaluation on {n_examples} bases: {kept} reused")
        return json.loads(kept.read_text())
    command = ["nice", "-n", str(nice), str(python), "scripts/run_candidate_eval.py", "--experiment", name,
               "--output-dir", str(base_dir), "--n-examples", str(n_examples)]  # fmt: skip
    log(f"study evaluation on {n_examples} bases: {' '.join(command[3:])}")
    with open(base_dir / name / f"candidate_eval_n{n_examples}.log", "w") as stream:
        subprocess.run(command, cwd=study_repo, stdout=stream, stderr=subprocess.STDOUT, env=thread_env(threads),
                       check=True)  # fmt: skip
    shutil.move(base_dir / name / "candidate_eval_results.json", kept)  # the study writes one fixed file name
    return json.loads(kept.read_text())


def study_model(python: Path, study_repo: Path, run_dir: Path) -> dict:
    """Vocabulary, parameter count and initial weight scale per kind of the study's model at its run's config."""
    probe = subprocess.run([str(python), "-c", STUDY_MODEL_PROBE, str(run_dir / "config.yaml")], cwd=study_repo,
                           capture_output=True, text=True, env=thread_env(1), check=True)  # fmt: skip
    facts = json.loads(probe.stdout.strip().splitlines()[-1])
    count = sum(int(n) for n, _ in facts["parameters"].values())
    return {"vocab": facts["vocab"], "parameters": count, "scales": weight_scales(facts["parameters"], STUDY_KINDS)}


def our_model(folder: Path) -> dict:
    """The same facts of our recipe's model, built as its run in ``folder`` built it (its ``run.json``: the model's
    config, the task and the seed)."""
    import torch
    from transformers import AutoModelForCausalLM, set_seed

    from datasets_builder import build_dataset
    from hf_icot.data.answer_only import answer_only_tokenizer
    from hf_icot.modeling.loading import scratch_config

    run = json.loads((folder / "run.json").read_text())
    task = {key: value for key, value in run["task"].items() if key != "config"}
    dataset, _ = build_dataset("ambiguity", task)
    tokenizer = answer_only_tokenizer(dataset)
    set_seed(run["seed"])  # the draw need not be the run's: the scale of each kind is what is compared
    config = {key: value for key, value in run["model"].items() if key != "parameters"}
    model = AutoModelForCausalLM.from_config(scratch_config(config, tokenizer))
    with torch.no_grad():
        parameters = {n: [p.numel(), float(p.double().pow(2).mean().sqrt())] for n, p in model.named_parameters()}
    return {"vocab": len(tokenizer), "parameters": model.num_parameters(),
            "scales": weight_scales(parameters, OUR_KINDS)}  # fmt: skip


def train_ours(k: int, n_bases: int, seed: int, output_dir: Path, threads: int, nice: int) -> Path:
    """Our recipe's run at this point (skipped when its run.json exists); its folder."""
    if (output_dir / "run.json").exists():
        log(f"our recipe: {output_dir}/run.json exists, reused")
        return output_dir
    command = ["nice", "-n", str(nice), *our_command(k, n_bases, seed, output_dir)]
    log(f"our recipe: {' '.join(command[3:])}")
    output_dir.mkdir(parents=True, exist_ok=True)
    env = {**thread_env(threads), "PYTHONPATH": str(REPO)}
    start = time.time()
    with open(output_dir.parent / f"{output_dir.name}.log", "w") as stream:
        subprocess.run(command, cwd=REPO, stdout=stream, stderr=subprocess.STDOUT, env=env, check=True)
    (output_dir / "wall_time.json").write_text(json.dumps({"wall_s": round(time.time() - start, 1)}))
    log(f"our recipe: done in {time.time() - start:.0f} s")
    return output_dir


# ---------------------------------------------------------------------------------------------------- figures


def read_diagnostics(folder: Path) -> list[dict[str, float]]:
    with open(folder / "diagnostics.csv", encoding="utf-8") as stream:
        return [{key: float(value) for key, value in row.items() if value != ""} for row in csv.DictReader(stream)]


def figures(steps, candidate, gaps, log_k: float) -> dict:
    """Both rules' τ and plateau of one candidate-loss series (and its z-gap series, for the study's onset)."""
    from hf_icot.diagnostics.tau import crossing  # our τ rule: one place for it

    threshold = 0.5 * log_k
    interpolated = crossing(steps, candidate, threshold)
    tau = interpolated[0] if interpolated else None
    onset = binding_onset(steps, gaps)
    before = plateau_before_onset(steps, candidate, onset)
    window = plateau_window(steps, candidate, tau)
    climb = [(v / log_k, s) for s, v in zip(steps, candidate) if tau and 50 <= s <= 0.75 * tau]
    return {
        "climb_over_log_k": f"{max(climb)[0]:.2f} (step {max(climb)[1]:.0f})" if climb else None,
        "tau_first_below": first_below(steps, candidate, threshold),
        "tau_interpolated": tau,
        "binding_onset": onset,
        "plateau_before_onset_over_log_k": before / log_k if before is not None else None,
        "plateau_window_over_log_k": window / log_k if window is not None else None,
        "interval": float(steps[1] - steps[0]) if len(steps) > 1 else None,
    }


def our_figures(folder: Path) -> dict:
    rows = read_diagnostics(folder)
    run = json.loads((folder / "run.json").read_text())
    steps = [r["step"] for r in rows]
    found = figures(steps, [r["candidate_loss"] for r in rows], [r["z_shuffle_gap"] for r in rows], run["log_k"])
    history = json.loads((folder / "training_log.json").read_text())
    runtime = next((e["train_runtime"] for e in history if "train_runtime" in e), None)
    wall = json.loads(((folder / "wall_time.json") if (folder / "wall_time.json").exists() else
                       (folder / "sweep.json")).read_text()).get("wall_s")  # fmt: skip
    found.update(steps_trained=run["max_steps"], wall_s=wall, parameters=run["model"]["parameters"],
                 steps_per_s=run["max_steps"] / runtime if runtime else None)  # fmt: skip
    return found


def committed_seeds(k: int, n_bases: int) -> dict[int, dict]:
    """Our figures of every committed seed of our recipe at this point under the study's schedule."""
    return {
        int(folder.name.rsplit("_s", 1)[1]): our_figures(folder)
        for folder in sorted(RECORDS.glob(f"cos_k{k}_nb{n_bases}_lr1e-3_bs128_s*"))
    }


def table(study: dict, evaluations: dict[int, dict], ours: dict, our_facts: dict, seeds: dict, k: int) -> str:
    """The side-by-side table (markdown)."""
    columns = [f"study's code, its eval on {n} bases" for n in evaluations] + ["our recipe"]

    def spread(key: str, digits: int) -> str:
        values = ", ".join(fmt(figures[key], digits) for figures in seeds.values())
        return f"seeds {', '.join(map(str, seeds))}: {values}" if seeds else "—"

    sides = [*evaluations.values(), ours]

    def row(label: str, key: str, digits: int = 1) -> list[str]:
        return [label, *(fmt(side[key], digits) for side in sides)]

    rows = [
        ["", *columns],
        row("τ, first evaluation below 0.5 log K (the study's rule)", "tau_first_below", 0),
        row("τ, crossing interpolated (our rule)", "tau_interpolated"),
        row("evaluated every (steps)", "interval", 0),
        row("plateau / log K, mean before the z-gap onset (the study's rule)", "plateau_before_onset_over_log_k", 3),
        row("plateau / log K, median over 0.25-0.75 τ (our rule)", "plateau_window_over_log_k", 3),
        row("highest plateau candidate loss / log K, step 50 to 0.75 τ", "climb_over_log_k"),
        row("z-gap binding onset (gap > 0.5 at 3 evaluations in a row)", "binding_onset", 0),
        ["candidate loss measured on", *(f"{n} bases × 1 random z" for n in evaluations), "20 bases × all K z"],
        ["our committed records here: τ interpolated", *([""] * len(evaluations)), spread("tau_interpolated", 1)],
        [
            "our committed records here: plateau / log K (our rule)",
            *([""] * len(evaluations)),
            spread("plateau_window_over_log_k", 3),
        ],  # fmt: skip
    ]
    facts = [
        ["", "study's model (TransformerLens)", "our model (GPT-2)"],
        ["parameters", fmt(study["model"]["parameters"]), fmt(our_facts["parameters"])],
        ["vocabulary", fmt(study["model"]["vocab"]), fmt(our_facts["vocab"])],
        *[
            [
                f"initial weight RMS: {kind}",
                fmt(study["model"]["scales"].get(kind), 4),
                fmt(our_facts["scales"][kind], 4),
            ]
            for kind in OUR_KINDS
        ],  # fmt: skip
        ["training steps/s (1 thread)", fmt(study["timing"]["steps_per_s"], 2), fmt(ours["steps_per_s"], 2)],
        [
            "steps trained, wall time (s)",
            f"{study['timing']['last_checkpoint']:,}, {fmt(study['timing']['wall_s'], 0)}",
            f"{ours['steps_trained']:,}, {fmt(ours['wall_s'], 0)}",
        ],  # fmt: skip
    ]
    return f"K = {k}, log K = {math.log(k):.4f}\n\n{markdown(rows)}\n\n{markdown(facts)}\n"


def plot_curves(curves: dict[str, tuple[list[float], list[float]]], log_k: float, title: str, path: Path) -> Path:
    """The candidate loss over log K of each side against the step, with log K and the τ threshold marked."""
    from hf_icot.studies.report import pyplot, save_figure

    fig, ax = pyplot().subplots(figsize=(7, 4))
    for label, (steps, values) in curves.items():
        ax.plot(steps, [v / log_k for v in values], label=label, linewidth=1.2)
    ax.axhline(1.0, color="grey", linewidth=0.8, label="log K")
    ax.axhline(0.5, color="grey", linestyle="--", linewidth=0.8, label="0.5 log K (τ)")
    ax.set(xlabel="optimiser step", ylabel="candidate loss / log K", xlim=(0, max(max(s) for s, _ in curves.values())))
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=8)
    return save_figure(fig, path)


# -------------------------------------------------------------------------------------------------------- main


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__,
        epilog="Get the study's code with: git clone https://github.com/mihirs-0/synass-lens",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--study-repo",
        type=Path,
        required=True,
        help="a checkout of the study's code (git clone https://github.com/mihirs-0/synass-lens)",
    )
    parser.add_argument(
        "--venv",
        type=Path,
        default=REPO / ".venv-synass",
        help="the study's virtual environment, made here if missing (default: .venv-synass)",
    )
    parser.add_argument(
        "--work-dir",
        type=Path,
        default=REPO / "outputs" / "marginals_vs_study",
        help="where both runs, the logs and the table go (default: outputs/marginals_vs_study)",
    )
    parser.add_argument("--k", type=int, default=10, help="K, targets per base (default: 10)")
    parser.add_argument("--n-bases", type=int, default=200, help="n_b, base strings (default: 200, D = 2,000)")
    parser.add_argument("--seed", type=int, default=0, help="seed of both runs (default: 0)")
    parser.add_argument(
        "--checkpoint-every",
        type=int,
        default=10,
        help="steps between the study's checkpoints, hence its evaluations (default: 10)",
    )
    parser.add_argument("--stop-step", type=int, default=1000,
                        help="the study's checkpoint after which its training is ended (default: 1000, about 4 "
                        "times our τ at this point)")  # fmt: skip
    parser.add_argument("--n-examples", type=int, nargs="+", default=[32, 200],
                        help="bases the study's candidate evaluation scores, one evaluation per value (default: 32, "
                        "its own default, and 200)")  # fmt: skip
    parser.add_argument("--reuse-our-record", action="store_true",
                        help="read our side from results/marginals/runs/cos_k{K}_nb{n_b}_lr1e-3_bs128_s{seed} "
                        "instead of training our recipe")  # fmt: skip
    parser.add_argument(
        "--keep-optimizer-states",
        action="store_true",
        help="keep the optimizer.pt of the study's checkpoints (default: delete them, ~6.5 MB each)",
    )
    parser.add_argument("--threads", type=int, default=1, help="torch threads of every run (default: 1)")
    parser.add_argument("--nice", type=int, default=5, help="niceness of every run (default: 5)")
    args = parser.parse_args(argv)
    if not (args.study_repo / "scripts" / "train.py").exists():
        parser.error(f"--study-repo {args.study_repo} has no scripts/train.py; clone the study's code with git clone "
                     "https://github.com/mihirs-0/synass-lens PATH and pass that PATH.")  # fmt: skip
    for flag in ("k", "n_bases", "checkpoint_every", "stop_step", "threads"):
        if getattr(args, flag) < 1:
            parser.error(f"--{flag.replace('_', '-')} {getattr(args, flag)} is not allowed; it must be at least 1.")
    if any(n < 1 for n in args.n_examples):
        parser.error(f"--n-examples {args.n_examples} is not allowed; every value must be at least 1.")
    if not 2 <= args.k <= 36:
        parser.error(f"--k {args.k} is not allowed; distinct first target characters need 2 <= K <= 36.")
    if args.stop_step % args.checkpoint_every:
        parser.error(f"--stop-step {args.stop_step} is not a multiple of --checkpoint-every {args.checkpoint_every}; "
                     "the study checkpoints only at multiples.")  # fmt: skip
    record = RECORDS / f"cos_k{args.k}_nb{args.n_bases}_lr1e-3_bs128_s{args.seed}"
    if args.reuse_our_record and not (record / "run.json").exists():
        parser.error(f"--reuse-our-record: there is no committed record {record.relative_to(REPO)}; drop the flag "
                     "to train our recipe.")  # fmt: skip
    args.record = record
    args.study_repo, args.venv, args.work_dir = (p.resolve() for p in (args.study_repo, args.venv, args.work_dir))
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    schedule = yaml.safe_load(SCHEDULE_CONFIG.read_text())
    if args.stop_step >= schedule["max_steps"]:
        raise SystemExit(f"error: --stop-step {args.stop_step} is not below the schedule's max_steps "
                         f"{schedule['max_steps']}; give a smaller one.")  # fmt: skip
    schedule["batch_size"] = schedule["per_device_train_batch_size"]
    base_dir = args.work_dir / "study"
    name = f"bz_k{args.k}_nb{args.n_bases}_s{args.seed}_every{args.checkpoint_every}"
    base_dir.mkdir(parents=True, exist_ok=True)

    python = ensure_venv(args.venv)
    overrides = study_overrides(args.k, args.n_bases, args.seed, schedule, args.checkpoint_every, name, base_dir)
    study = {"timing": train_study(python, args.study_repo, overrides, base_dir / name, args.stop_step,
                                   args.keep_optimizer_states, args.threads, args.nice)}  # fmt: skip
    study["model"] = study_model(python, args.study_repo, base_dir / name)
    evaluations, curves = {}, {}
    for n in args.n_examples:
        result = evaluate_study(python, args.study_repo, base_dir, name, n, args.threads, args.nice)
        curves[f"study's code, its eval on {n} bases"] = (result["steps"], result["candidate_loss"])
        evaluations[n] = figures(result["steps"], result["candidate_loss"], result["z_gap"], result["log_k"])
        plateau = result["candidate_loss_plateau_avg"]  # the study's own figure, beside our reading of its rule
        evaluations[n]["plateau_study_own_over_log_k"] = plateau / result["log_k"] if plateau is not None else None
        evaluations[n]["binding_onset_study_own"] = result["binding_onset_step"]

    our_dir = args.record if args.reuse_our_record else args.work_dir / "ours" / args.record.name
    if not args.reuse_our_record:
        train_ours(args.k, args.n_bases, args.seed, our_dir, args.threads, args.nice)
    ours = our_figures(our_dir)
    rows = read_diagnostics(our_dir)
    curves["our recipe (20 bases x all K z)"] = ([r["step"] for r in rows], [r["candidate_loss"] for r in rows])
    our_facts = our_model(our_dir)

    text = table(study, evaluations, ours, our_facts, committed_seeds(args.k, args.n_bases), args.k)
    print(text)
    (args.work_dir / "side_by_side.md").write_text(text)
    summary = {"point": {"k": args.k, "n_bases": args.n_bases, "seed": args.seed}, "schedule": schedule,
               "study": {**study, "evaluations": evaluations, "run_dir": str(base_dir / name)},
               "ours": {**ours, **our_facts, "run_dir": str(our_dir)}}  # fmt: skip
    (args.work_dir / "summary.json").write_text(json.dumps(summary, indent=2, default=str))
    title = f"The study's code and our recipe: K = {args.k}, D = {args.k * args.n_bases:,}, the study's schedule, "
    plot_curves(curves, math.log(args.k), title + f"seed {args.seed}", args.work_dir / "side_by_side.png")
    log(f"wrote {args.work_dir / 'side_by_side.md'}, side_by_side.png and summary.json")
    return 0


if __name__ == "__main__":
    sys.exit(main())
