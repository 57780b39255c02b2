"""PCCoT's own model class beside hf_icot's PCCoT loss, on the same weights and the same batches.

    git clone https://github.com/whyNLP/PCCoT /work/pccot    # their code, outside this repository
    python bench/latent_vs_public/pccot.py --pccot /work/pccot [--steps 200]

Nothing of their code is committed or fetched here: the script imports ``models/modeling_gpt2.py`` (class
``PCCoTGPT2LMHeadModel``) and ``models/configuration_gpt2.py`` from the checkout it is given, as a package of their
``models/`` folder without running its ``__init__.py`` (which registers a wandb callback), and changes, at run time
only, what keeps it from running with this project's packages: its GPT-2 decoder (``transformer``) takes and gives
the KV cache as a list of ``(k, v)`` tuples (transformers 4.46); transformers 5 takes and returns a ``DynamicCache``
as ``cache``, so the decoder's forward is wrapped to turn the list into a cache on the way in and the cache into the
list on the way out (the same tensors), and to drop the arguments transformers 5 no longer takes.

The batches are the quickstart's parity task (questions of 20 tokens, chain CoT of 3 one-token steps), rendered by
:class:`hf_icot.methods.pccot.PCCoTMethod`; their tensors are ours renamed (its question is ours with its ``<eos>``,
its answer prompt our ``<eos> ####``, so its sequences are ours token for token: the module docstring of
:mod:`hf_icot.methods.pccot`). The model: a 2-layer GPT-2, 64 wide, no dropout, initial weights of std 0.1.

1. **One batch, same weights**, for several thought counts, iterations, projection on and off, layerwise std on and
   off: each side's loss and its three terms, and every parameter's gradient (its projection included), which must
   agree within 1e-5 (losses) and 1e-4 (gradients). Then a batch whose questions differ in length (every other one
   2 tokens shorter, so those rows are left-padded): as published, its iteration passes get no attention mask and
   attend to the padding (a gap is expected and printed); with the batch's mask handed to those passes by the
   wrapper, the two agree again.
2. **A short training run**: the same initial weights and batches, AdamW (lr 1e-3) on each side, 6 thoughts from 3
   iterations with the projection, ``--steps`` steps; both loss curves on one plot.

Writes ``pccot_summary.json`` and ``pccot_curves.png`` into ``--out`` (default: this folder).
"""

from __future__ import annotations

import argparse
import copy
import importlib
import importlib.machinery
import importlib.util
import json
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
if str(REPO) not in sys.path:  # run as a script: its sibling run.py is imported as bench.latent_vs_public.run
    sys.path.insert(0, str(REPO))

#: (thoughts, iterations, projection, layerwise std, loss weights alpha / beta / gamma) of the one-batch checks.
CHECKS = [
    (2, 1, False, True, (1.0, 1.0, 1.0)),
    (6, 3, True, True, (1.0, 1.0, 1.0)),
    (4, 4, False, False, (0.5, 2.0, 3.0)),
    (8, 0, True, True, (1.0, 1.0, 1.0)),
]


def their_modules(repo: Path) -> tuple[Any, Any]:
    """Their ``modeling_gpt2`` and ``configuration_gpt2``, from a package made of their ``models/`` folder alone."""
    spec = importlib.machinery.ModuleSpec("their_pccot_models", None, is_package=True)
    package = importlib.util.module_from_spec(spec)
    package.__path__ = [str(repo / "models")]
    sys.modules["their_pccot_models"] = package
    return (
        importlib.import_module("their_pccot_models.modeling_gpt2"),
        importlib.import_module("their_pccot_models.configuration_gpt2"),
    )


def tuple_cache_decoder(decoder: Any, state: dict) -> None:
    """Give ``decoder`` (their model's GPT-2 ``transformer``) the cache interface its code was written for; with
    ``state["mask"]`` set, a call over new embeddings on a cache without an attention mask (its iteration passes)
    gets the batch's mask over the cached positions."""
    import torch
    from transformers import DynamicCache

    plain = decoder.forward

    def forward(past_key_values=None, return_dict=None, output_attentions=None, **kwargs):
        kwargs = {name: value for name, value in kwargs.items() if value is not None}
        if past_key_values is not None:
            cache = DynamicCache(config=decoder.config)
            for layer, (key, value) in enumerate(past_key_values):
                cache.update(key, value, layer)
            kwargs["cache"] = cache
            if state.get("mask") is not None and "attention_mask" not in kwargs:
                past, new = cache.get_seq_length(), kwargs["inputs_embeds"].shape[1]
                mask = state["mask"][:, :past]
                kwargs["attention_mask"] = torch.cat([mask, mask.new_ones(mask.shape[0], new)], dim=1)
        out = plain(use_cache=True, **kwargs)
        out["past_key_values"] = [(layer.keys, layer.values) for layer in out["cache"].layers]
        return out

    decoder.forward = forward


def their_inputs(batch: dict, renderer: Any) -> dict:
    """Their forward's arguments from our batch: the same tensors (see the module docstring)."""
    import torch

    ids = batch["input_ids"]
    latent = (ids == renderer.tokens.latent).any(dim=0).nonzero().flatten()
    first, end = int(latent[0]), int(latent[-1]) + 1
    kd = (batch["answer_positions"] - end).unique()
    assert kd.numel() == 1, "every row's '####' ends at one column after <|end-latent|>"
    return {
        "input_ids": ids,
        "attention_mask": batch["attention_mask"],
        "labels": batch["labels"][:, end:],  # its labels start at <eot>, shifted inside its forward
        "key_indices": [first, end, int(kd)],
        "cot_input_ids": batch["teacher_input_ids"],
        "cot_attention_mask": batch["teacher_attention_mask"],
        "cot_labels": batch["teacher_labels"],
        "cot_kd_indices": batch["teacher_answer_positions"].to(torch.long),
    }


def both_sides(modules, base, thoughts, iterations, projection, layerwise, weights, seed=1):
    """Their model and ours (with our method) from ``base``'s weights, their projection drawn from ``seed``."""
    import torch

    from hf_icot.curriculum import PCCoT
    from hf_icot.methods.latent_forward import LatentProjection, attach_projection
    from hf_icot.methods.pccot import PCCoTConfig, PCCoTMethod

    modeling, configuration = modules
    names = ("vocab_size", "n_positions", "n_embd", "n_layer", "n_head", "resid_pdrop", "embd_pdrop", "attn_pdrop",
             "initializer_range")  # fmt: skip
    alpha, beta, gamma = weights
    config = configuration.PCCoTGPT2Config(
        **{name: getattr(base.config, name) for name in names}, num_iterations=iterations,
        use_projection=projection, use_layerwise_std=layerwise, loss_alpha=alpha, loss_beta=beta, loss_gamma=gamma,
    )  # fmt: skip
    torch.manual_seed(seed)
    theirs = modeling.PCCoTGPT2LMHeadModel(config)
    missing, unexpected = theirs.load_state_dict(base.state_dict(), strict=False)
    assert not unexpected and all(name.startswith("prj.") for name in missing), (missing, unexpected)
    state: dict = {}
    tuple_cache_decoder(theirs.transformer, state)
    ours = copy.deepcopy(base)
    if projection:  # theirs: Linear, GELU, Linear, LayerNorm; ours: Dropout(0), Linear, GELU, Linear, LayerNorm
        width = base.config.n_embd
        ours_projection = LatentProjection(width, width, dropout=0.0, layer_norm=True)
        mapping = {"0": "1", "2": "3", "3": "ln"}
        ours_projection.load_state_dict(
            {f"{mapping[name.split('.')[0]]}.{name.split('.')[1]}": t for name, t in theirs.prj.state_dict().items()}
        )
        attach_projection(ours, ours_projection)
    method = PCCoTMethod(
        PCCoT(num_latent_tokens=thoughts, num_iterations=iterations),
        PCCoTConfig(loss_alpha=alpha, loss_beta=beta, loss_gamma=gamma, use_layerwise_std=layerwise,
                    use_projection=projection),
    )  # fmt: skip
    return theirs, state, ours, method


def one_batch(theirs, state, ours, method, renderer, examples, mask_iterations=False) -> dict:
    from bench.latent_vs_public.run import largest_gradient_gap
    from hf_icot.methods.pccot import pccot_loss

    method.renderer = renderer
    batch = method.render(examples, 0, True, collator=None)[0]
    theirs.zero_grad()
    ours.zero_grad()
    state["mask"] = batch["attention_mask"] if mask_iterations else None
    their_loss = theirs(**their_inputs(batch, renderer)).loss
    our = pccot_loss(ours, latent_id=renderer.tokens.latent, iterations=method.schedule.num_iterations,
                     config=method.config, **batch)  # fmt: skip
    their_loss.backward()
    our.loss.backward()
    log = theirs._log_cache
    terms = {
        "loss": (their_loss.item(), our.loss.item()),
        "student_ce (its ccot_loss)": (log["ccot_loss"], our.student_ce.item()),
        "distill (its kd_loss)": (log["kd_loss"], our.distill.item()),
        "teacher_ce (its cot_loss)": (log["cot_loss"], our.teacher_ce.item()),
    }
    check = {name: {"theirs": a, "ours": b, "gap": abs(a - b)} for name, (a, b) in terms.items()}
    check["gradient_gap"] = largest_gradient_gap(theirs, ours, (("transformer.", "transformer."),))
    check["projection_gradient_gap"] = projection_gradient_gap(theirs, ours)
    return check


def projection_gradient_gap(theirs, ours) -> float:
    """The largest gap between the two projections' gradients (0 without one; inf where one side has none)."""
    if not hasattr(ours, "latent_projection"):
        return 0.0
    mapping = {"0": "1", "2": "3", "3": "ln"}
    mine = dict(ours.latent_projection.named_parameters())
    gap = 0.0
    for name, parameter in theirs.prj.named_parameters():
        other = mine[f"{mapping[name.split('.')[0]]}.{name.split('.')[1]}"].grad
        if parameter.grad is None or other is None:  # 0 iterations: no thought reaches the answer, on both sides
            gap = max(gap, 0.0 if parameter.grad is other else float("inf"))
        else:
            gap = max(gap, (parameter.grad - other).abs().max().item())
    return gap


def shortened(examples):
    """Every other question 2 tokens shorter, so those rows are left-padded in a batch."""
    return [{**ex, "question_ids": ex["question_ids"][2:]} if i % 2 else ex for i, ex in enumerate(examples)]


def training(modules, base, renderer, batches, steps) -> dict:
    import torch

    from hf_icot.methods.pccot import pccot_loss

    theirs, state, ours, method = both_sides(modules, base, 6, 3, True, True, (1.0, 1.0, 1.0))
    method.renderer = renderer
    curves, seconds = {"theirs": [], "ours": []}, {"theirs": 0.0, "ours": 0.0}
    optimizers = [torch.optim.AdamW(m.parameters(), lr=1e-3, weight_decay=0.0) for m in (theirs, ours)]
    for step in range(steps):
        batch = method.render(batches[step % len(batches)], step, True, collator=None)[0]
        for side, optimizer in zip(("theirs", "ours"), optimizers):
            start = time.perf_counter()
            optimizer.zero_grad()
            if side == "theirs":
                loss = theirs(**their_inputs(batch, renderer)).loss
            else:
                loss = pccot_loss(ours, latent_id=renderer.tokens.latent, iterations=3, config=method.config,
                                  **batch).loss  # fmt: skip
            loss.backward()
            optimizer.step()
            seconds[side] += time.perf_counter() - start
            curves[side].append(loss.item())
    return {"curves": curves, "seconds": seconds}


def plot(summary: dict, path: Path) -> None:
    from hf_icot.studies.report import pyplot, save_figure

    plt = pyplot()
    fig, ax = plt.subplots(figsize=(8, 4.5))
    curves = summary["training"]["curves"]
    ax.plot(curves["theirs"], label="their model class", linewidth=3, alpha=0.5)
    ax.plot(curves["ours"], label="hf_icot", linewidth=1, linestyle="--", color="black")
    ax.set_xlabel("optimizer step")
    ax.set_ylabel("training loss")
    ax.set_title("PCCoT, 6 thoughts from 3 Jacobi iterations, projection on")
    ax.legend()
    fig.suptitle("Same weights, batches and AdamW: PCCoT's model class and hf_icot")
    save_figure(fig, path)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pccot", type=Path, required=True, help="a checkout of whyNLP/PCCoT")
    parser.add_argument("--steps", type=int, default=200, help="AdamW steps of the training comparison")
    parser.add_argument("--batch-size", type=int, default=16, help="questions per batch")
    parser.add_argument("--out", type=Path, default=HERE, help="folder for pccot_summary.json and pccot_curves.png")
    args = parser.parse_args()
    if not (args.pccot / "models" / "modeling_gpt2.py").is_file():
        sys.exit(
            f"error: --pccot {str(args.pccot)!r} has no models/modeling_gpt2.py; give a checkout of whyNLP/PCCoT."
        )
    import torch

    from bench.latent_vs_public.run import task_batches, tiny_gpt2
    from hf_icot.methods.latent_batches import LatentRenderer

    torch.set_num_threads(1)
    modules = their_modules(args.pccot)
    tokenizer, batches = task_batches(n_batches=max(1, min(args.steps, 50)), batch_size=args.batch_size)
    renderer = LatentRenderer(tokenizer)
    base = tiny_gpt2(len(tokenizer))
    summary: dict = {"checks": []}
    cases = [(case, False, False) for case in CHECKS] + [(CHECKS[1], True, False), (CHECKS[1], True, True)]
    for (thoughts, iterations, projection, layerwise, weights), padded, masked in cases:
        theirs, state, ours, method = both_sides(modules, base, thoughts, iterations, projection, layerwise, weights)
        examples = shortened(batches[0]) if padded else batches[0]
        check = one_batch(theirs, state, ours, method, renderer, examples, mask_iterations=masked)
        setting = {"thoughts": thoughts, "iterations": iterations, "projection": projection,
                   "use_layerwise_std": layerwise, "loss_weights": weights, "padded": padded,
                   "their_iterations_masked": masked}  # fmt: skip
        summary["checks"].append({"setting": setting, **check})
        print(f"{json.dumps(setting)}\n  {json.dumps(check)}")
    summary["training"] = training(modules, base, renderer, batches, args.steps)
    curves = summary["training"]["curves"]
    summary["training"]["largest_curve_gap"] = max(abs(a - b) for a, b in zip(curves["theirs"], curves["ours"]))
    seconds = summary["training"]["seconds"]
    print(
        f"training: {args.steps} steps, final loss theirs {curves['theirs'][-1]:.5f} ours {curves['ours'][-1]:.5f}, "
        f"largest gap over the run {summary['training']['largest_curve_gap']:.2e}; seconds theirs "
        f"{seconds['theirs']:.1f} ours {seconds['ours']:.1f}"
    )
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "pccot_summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    plot(summary, args.out / "pccot_curves.png")


if __name__ == "__main__":
    main()
