"""Tables and plots of results/parity/ from the run folders the harness writes (results/parity/runs.yaml).

    python results/parity/make_results.py --runs outputs/parity --out results/parity

Writes ``summary.csv`` / ``summary.md`` (one row per run: model, curriculum, size, steps, samples, wall time, final
accuracies), ``mlp_by_shown.csv`` / ``.md`` (the MLPs' accuracy per number of CoT steps shown), ``children.csv`` /
``.md`` (per layer of each theory transformer: the share of nodes whose two largest attention weights fall on
their two children), ``curves_<group>.png`` (validation loss and answer accuracy against step, stage boundaries
marked) and ``attention_<run>.png`` (the final per-layer attention of one validation question). Every run uses
the data seed 0, so the secret support is recomputed from (n_bits, k, seed 0).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import torch

from hf_icot.publishing.run_files import EVAL_RESULTS_FILE, STAGES_FILE, TRAINING_LOG_FILE
from hf_icot.studies.report import fmt, pyplot, read_json, write_table

plt = pyplot()

RUNS = {  # run -> (group, model, curriculum)
    "a_log_icot": ("A", "A: gated Log-ICoT transformer", "Log-ICoT (log2 k + 1 stages)"),
    "a_stepwise": ("A", "A: gated Log-ICoT transformer", "Stepwise (one token per stage)"),
    "a_no_cot": ("A", "A: gated Log-ICoT transformer", "end to end (all CoT padded)"),
    "gpt2_log_icot": ("GPT-2", "GPT-2 from scratch (4 layers, width 32)", "Log-ICoT (log2 k + 1 stages)"),
    "gpt2_stepwise": ("GPT-2", "GPT-2 from scratch (4 layers, width 32)", "Stepwise (one token per stage)"),
    "b_stepwise": ("B", "B: one-layer linear attention + fixed MLP", "Stepwise from the left (pad)"),
    "b_no_cot": ("B", "B: one-layer linear attention + fixed MLP", "end to end (all CoT padded)"),
    "c_mixture": ("C", "C: MLP", "Mixture over CoT lengths with hints"),
    "c_no_cot": ("C", "C: MLP", "end to end (bits only)"),
    "a_log_icot_n16_k8": ("A-small", "A: gated Log-ICoT transformer", "Log-ICoT (log2 k + 1 stages)"),
}


def _last(log: list[dict], key: str):
    values = [entry[key] for entry in log if key in entry]
    return values[-1] if values else None


def summary_row(name: str, folder: Path) -> dict:
    group, model, curriculum = RUNS[name]
    config = read_json(folder / "config.json") or {}
    log = read_json(folder / TRAINING_LOG_FILE) or []
    results = read_json(folder / EVAL_RESULTS_FILE) or {}
    stages = read_json(folder / STAGES_FILE) or []
    steps = max((entry.get("step", 0) for entry in log), default=0)
    args = read_json(folder / "training_args.json") or {}
    batch = args.get("per_device_train_batch_size", 128)
    mlp = config.get("model_type") == "parity_mlp"
    return {
        "run": name,
        "model": model,
        "curriculum": curriculum,
        "n_bits": config.get("n_bits", 30),
        "k": config.get("k", 16),
        "parameters": _parameters(folder),
        "stages": len(stages) if stages else ("1 (mixture)" if mlp else ""),
        "steps": steps,
        "samples": steps * batch,
        "wall_s": (read_json(folder / "wall_time.json") or {}).get("wall_s"),
        "test implicit answer EM (generation)": fmt(
            results.get("test/shown=0/answer_acc" if mlp else "test/implicit/answer_em")
        ),
        "test explicit answer EM": fmt(None if mlp else results.get("test/explicit/answer_em")),
        "test explicit CoT EM": fmt(None if mlp else results.get("test/explicit/cot_em")),
        "val answer acc, CoT removed (teacher-forced, end)": fmt(
            _last(log, "eval_answer_acc" if mlp else "eval_answer_acc_no_cot")
        ),
    }


def _parameters(folder: Path) -> int | str:
    from safetensors.torch import load_file

    path = folder / "model.safetensors"
    return sum(t.numel() for t in load_file(path).values()) if path.is_file() else ""


def plot_group(group: str, names: list[str], runs: Path, out: Path) -> None:
    figure, (loss_axis, acc_axis) = plt.subplots(1, 2, figsize=(13, 4.5))
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for index, name in enumerate(names):
        log = read_json(runs / name / TRAINING_LOG_FILE) or []
        color = colors[index % len(colors)]
        label = RUNS[name][2]
        mlp = any("eval_answer_acc" in entry for entry in log)
        points = [(e["step"], e["eval_loss"]) for e in log if "eval_loss" in e and "step" in e]
        if points:
            loss_axis.plot(*zip(*points), color=color, label=label)
        key = "eval_answer_acc" if mlp else "eval_answer_acc_no_cot"
        points = [(e["step"], e[key]) for e in log if key in e and "step" in e]
        if points:
            acc_axis.plot(*zip(*points), color=color, label=f"{label}: CoT removed")
        if not mlp:
            points = [(e["step"], e["eval_answer_acc_stage"]) for e in log if "eval_answer_acc_stage" in e]
            if points:
                acc_axis.plot(*zip(*points), color=color, linestyle=":", label=f"{label}: stage layout")
        for stage in (read_json(runs / name / STAGES_FILE) or [])[1:]:
            for axis in (loss_axis, acc_axis):
                axis.axvline(stage["start_step"], color=color, linestyle="--", alpha=0.35, linewidth=0.8)
    loss_axis.set(title=f"{group}: validation loss (current stage's layout)", xlabel="optimizer step", ylabel="loss")
    loss_axis.set_yscale("log")
    acc_axis.set(
        title=f"{group}: validation answer accuracy", xlabel="optimizer step", ylabel="accuracy", ylim=(0, 1.05)
    )
    loss_axis.plot([], [], color="gray", linestyle="--", alpha=0.5, label="stage boundary")
    loss_axis.legend(fontsize=7)
    acc_axis.legend(fontsize=7)
    figure.tight_layout()
    figure.savefig(out / f"curves_{group}.png", dpi=110)
    plt.close(figure)


def attention_rows(name: str, runs: Path, out: Path) -> list[dict]:
    """Plot the final attention of a theory transformer on one validation question; per layer, the share of nodes
    whose two largest weights are on their two children."""
    from transformers import AutoModelForCausalLM

    import hf_icot.modeling.theory  # noqa: F401  (registers the theory models)
    from datasets_builder.tasks.parity import Params, secret_support
    from hf_icot.modeling.theory.log_icot_parity import tree_levels

    folder = runs / name
    if not (folder / "model.safetensors").is_file():
        return []
    if read_json(folder / "config.json").get("model_type") not in ("log_icot_parity", "linear_attention_parity"):
        return []
    model = AutoModelForCausalLM.from_pretrained(folder)
    c = model.config
    layout = "tree" if c.model_type == "log_icot_parity" else "chain"
    support = secret_support(
        Params(n_bits=c.n_bits, k=c.k, cot_layout=layout, train_size=1, validation_size=1, test_size=1)
    )
    T = c.n_bits + c.k + 4
    ids = torch.full((1, T), c.placeholder_token_id)  # every node padded: what the model computes by itself
    ids[0, : c.n_bits] = torch.randint(0, 2, (c.n_bits,)) * (c.one_token_id - c.zero_token_id) + c.zero_token_id
    with torch.no_grad():
        attention = model.compute(ids)["attention"]  # (L, B, T, T); B's weights do not depend on the input: (1, T, T)
    maps = attention[:, 0] if attention.dim() == 4 else attention  # (L, T, T)
    rows, children = [], {0: support}
    if layout == "tree":
        levels = tree_levels(c.n_bits, c.k)
        nodes_by_level = {lv: [p for p in range(T) if levels[p] == lv] for lv in range(1, c.num_layers + 1)}
    else:  # chain: step j reads step j - 1 and secret bit j + 1; step 1 reads the first two secret bits
        nodes_by_level = {1: list(range(c.n_bits + 1, c.n_bits + c.k))}
    figure, axes = plt.subplots(1, len(nodes_by_level), figsize=(4.2 * len(nodes_by_level), 3.6), squeeze=False)
    for index, (level, nodes) in enumerate(nodes_by_level.items()):
        grid = maps[index][nodes][:, : c.n_bits + c.k].abs()
        hits = 0
        for row, p in enumerate(nodes):
            if layout == "tree":
                want = {children[level - 1][2 * row], children[level - 1][2 * row + 1]}
            else:
                want = {support[0], support[1]} if row == 0 else {p - 1, support[row + 1]}
            top = set(torch.topk(grid[row], 2).indices.tolist())
            hits += top == want
            for w in want:
                axes[0][index].scatter(w, row, marker="x", color="red", s=18)
        children[level] = nodes
        rows.append({"run": name, "layer": index + 1, "nodes": len(nodes), "children found": f"{hits}/{len(nodes)}"})
        image = axes[0][index].imshow(grid, aspect="auto", cmap="viridis")
        axes[0][index].set(
            title=f"layer {index + 1}: level-{level} nodes" if layout == "tree" else "the one layer: CoT steps",
            xlabel="attended position (bits, <eos>, CoT)",
            ylabel="node (row)",
        )
        figure.colorbar(image, ax=axes[0][index], label="|attention weight|")
    axes[0][0].scatter([], [], marker="x", color="red", label="true children")
    axes[0][0].legend(fontsize=7, loc="lower right")
    figure.suptitle(f"{name}: final attention, all CoT padded")
    figure.tight_layout()
    figure.savefig(out / f"attention_{name}.png", dpi=110)
    plt.close(figure)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", default="outputs/parity", help="folder holding the run folders")
    parser.add_argument("--out", default="results/parity", help="where the tables and plots go")
    options = parser.parse_args()
    runs, out = Path(options.runs), Path(options.out)
    out.mkdir(parents=True, exist_ok=True)
    present = [name for name in RUNS if (runs / name / EVAL_RESULTS_FILE).is_file()]
    write_table([summary_row(name, runs / name) for name in present], out, "summary")
    mlp_rows = []
    for name in present:
        results = read_json(runs / name / EVAL_RESULTS_FILE)
        if any("shown=" in key for key in results):
            k = max(int(key.split("shown=")[1].split("/")[0]) for key in results) + 1
            row = {"run": name}
            row.update({f"test acc, {i} shown": fmt(results[f"test/shown={i}/answer_acc"]) for i in range(k)})
            mlp_rows.append(row)
    write_table(mlp_rows, out, "mlp_by_shown")
    groups: dict[str, list[str]] = {}
    for name in present:
        groups.setdefault(RUNS[name][0], []).append(name)
    for group, names in groups.items():
        plot_group(group, names, runs, out)
    attention = [row for name in present for row in attention_rows(name, runs, out)]
    write_table(attention, out, "children")


if __name__ == "__main__":
    main()
