"""Coconut's and CODI's own model classes beside hf_icot's latent losses, on the same weights and the same batches.

    git clone https://github.com/facebookresearch/coconut /work/coconut    # their code, outside this repository
    git clone https://github.com/zhenyi4/codi /work/codi
    python bench/latent_vs_public/run.py --coconut /work/coconut --codi /work/codi [--steps-per-stage 100]

Nothing of their code is committed or fetched here: the script imports ``coconut.py`` (class ``Coconut``) and CODI's
``src/model.py`` (class ``CODI``) from the checkouts it is given, and changes, at run time only, what keeps them from
running with this project's packages on a CPU:

* Coconut hands its GPT-2 the KV cache as a list of ``(k, v)`` tuples and iterates the one it gets back that way;
  transformers 5 takes and returns a ``DynamicCache``. Its GPT-2 is wrapped by :func:`tuple_cache_lm`, which turns the
  list into a ``DynamicCache`` on the way in and the cache into the list on the way out (the same tensors).
* CODI loads its model in float16 (bfloat16 with ``--bf16``); for the comparison it is loaded in float32 (the loader
  its module imported is wrapped to pass ``torch_dtype=torch.float32``). It reads its options from its own
  ``TrainingArguments``; a namespace with its defaults (and ``print_loss`` off) stands in, so no ``torch.distributed``
  or wandb is touched. Its forward is called directly with the tensors its collator would build.

The task is the quickstart's (4-sparse parity over 20 bits, chain CoT of 3 one-token steps): every question has the
same length, so no side pads (CODI's default attends to its encoder's left padding; ours masks it; on unpadded
batches the two agree). The model: a 2-layer GPT-2, 64 wide, no dropout, initial weights of std 0.1.

1. **One batch, same weights**: each class's loss (and CODI's three terms) against ours, and every parameter's
   gradient (CODI's projection included); printed with the largest differences, which must be below 1e-5 (losses)
   and 1e-4 (gradients).
2. **A short training run**: the same initial weights, the same batches in the same order, AdamW (lr 1e-3) for
   each side — Coconut through stages 0-3 (``--steps-per-stage`` each, one more step of thought per stage), CODI
   (3 thoughts, projection on) for ``4 × --steps-per-stage`` steps — and both loss curves on one plot.

Writes ``summary.json`` and ``curves.png`` into ``--out`` (default: this folder).
"""

from __future__ import annotations

import argparse
import copy
import importlib.util
import json
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

REPO = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent


def tuple_cache_lm(lm: Any) -> Any:
    """Coconut's GPT-2 with the cache interface it was written for: ``past_key_values`` as a list of ``(k, v)``
    tuples, turned into transformers 5's ``DynamicCache`` on the way in and back into the list on the way out."""
    import torch
    from transformers import DynamicCache

    class TupleCacheLM(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lm = lm

        def get_input_embeddings(self) -> torch.nn.Module:
            return self.lm.get_input_embeddings()

        def forward(self, past_key_values=None, **kwargs):
            if past_key_values is not None:
                cache = DynamicCache(config=self.lm.config)
                for layer, (key, value) in enumerate(past_key_values):
                    cache.update(key, value, layer)
                kwargs["cache"] = cache
            out = self.lm(use_cache=True, **kwargs)
            cache = out.get("past_key_values")
            if cache is not None:
                out["past_key_values"] = [(layer.keys, layer.values) for layer in cache.layers]
            return out

    return TupleCacheLM()


def load_module(path: Path, name: str):
    """A file of a public implementation's checkout (outside this repository, not a package) as the module ``name``."""
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def task_batches(n_batches: int, batch_size: int, seed: int = 0):
    """The quickstart's parity data, its word-level tokenizer (with the latent markers) and prepared examples."""
    from datasets_builder import build_dataset
    from hf_icot.curriculum.layout import LATENT_TOKENS
    from hf_icot.data.collator import ICoTCollator
    from hf_icot.data.tokenization import build_word_level_tokenizer

    size = n_batches * batch_size
    args = {"n_bits": 20, "k": 4, "cot_layout": "chain", "train_size": size, "validation_size": 8, "test_size": 8}
    dataset, _ = build_dataset("parity", {**args, "seed": seed})
    tokenizer = build_word_level_tokenizer(dataset, extra_tokens=LATENT_TOKENS)
    prepared, _ = ICoTCollator(tokenizer).prepare_dataset(dataset["train"])
    examples = [prepared[i] for i in range(size)]
    return tokenizer, [examples[i : i + batch_size] for i in range(0, size, batch_size)]


def tiny_gpt2(vocab_size: int, seed: int = 0) -> Any:
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(seed)
    config = GPT2Config(
        vocab_size=vocab_size, n_positions=40, n_embd=64, n_layer=2, n_head=4, resid_pdrop=0.0, embd_pdrop=0.0,
        attn_pdrop=0.0, initializer_range=0.1,
    )  # fmt: skip
    return GPT2LMHeadModel(config)


def largest_gradient_gap(theirs: Any, ours: Any, prefix_pairs=(("", ""),)) -> float:
    gap = 0.0
    for their_prefix, our_prefix in prefix_pairs:
        our_params = dict(ours.named_parameters())
        for name, parameter in theirs.named_parameters():
            if not name.startswith(their_prefix) or parameter.grad is None:
                continue
            mine = our_params[our_prefix + name[len(their_prefix) :]]
            gap = max(gap, (parameter.grad - mine.grad).abs().max().item())
    return gap


# -- Coconut --------------------------------------------------------------------------------------------------------


def coconut_side(coconut_repo: Path, tokenizer, batches, steps_per_stage: int) -> dict:
    import torch

    from hf_icot.curriculum.latent import LatentPlan
    from hf_icot.methods.coconut import coconut_loss
    from hf_icot.methods.latent_batches import LatentRenderer

    module = load_module(coconut_repo / "coconut.py", "their_coconut")
    renderer = LatentRenderer(tokenizer)
    ids = renderer.tokens

    def their_model(lm):
        return module.Coconut(tuple_cache_lm(lm), ids.latent, ids.start, ids.end, renderer.eos)

    # 1. One batch mixing stages (0-3 latent slots per row), the same weights.
    base = tiny_gpt2(len(tokenizer))
    ours, theirs = copy.deepcopy(base), their_model(copy.deepcopy(base))
    plans = [LatentPlan(k % 4, k % 4) for k in range(len(batches[0]))]
    batch, _ = renderer.render(batches[0], plans)
    their_loss = theirs(batch["input_ids"], batch["attention_mask"], batch["labels"], batch["position_ids"]).loss
    our_loss = coconut_loss(ours, latent_id=ids.latent, **batch).loss
    their_loss.backward()
    our_loss.backward()
    check = {
        "their_loss": their_loss.item(),
        "our_loss": our_loss.item(),
        "loss_gap": abs(their_loss.item() - our_loss.item()),
        "gradient_gap": largest_gradient_gap(theirs.base_causallm.lm, ours),
    }

    # 2. Training through stages 0-3, the same batches and AdamW on each side.
    ours, their_lm = copy.deepcopy(base), copy.deepcopy(base)
    theirs = their_model(their_lm)
    curves = {"theirs": [], "ours": []}
    optimizers = [torch.optim.AdamW(m.parameters(), lr=1e-3, weight_decay=0.0) for m in (their_lm, ours)]
    seconds = {"theirs": 0.0, "ours": 0.0}
    for step in range(4 * steps_per_stage):
        stage = step // steps_per_stage
        examples = batches[step % len(batches)]
        batch, _ = renderer.render(examples, [LatentPlan(stage, stage)] * len(examples))
        for side, optimizer in zip(("theirs", "ours"), optimizers):
            start = time.perf_counter()
            optimizer.zero_grad()
            if side == "theirs":
                loss = theirs(batch["input_ids"], batch["attention_mask"], batch["labels"], batch["position_ids"]).loss
            else:
                loss = coconut_loss(ours, latent_id=ids.latent, **batch).loss
            loss.backward()
            optimizer.step()
            seconds[side] += time.perf_counter() - start
            curves[side].append(loss.item())
    return {
        "check": check,
        "curves": curves,
        "seconds": seconds,
        "stage_starts": [steps_per_stage * s for s in range(1, 4)],
    }


# -- CODI -----------------------------------------------------------------------------------------------------------


def codi_side(codi_repo: Path, tokenizer, batches, steps: int, work: Path) -> dict:
    import torch

    from hf_icot.curriculum.latent import CODI as CODISchedule
    from hf_icot.methods.codi import CODIConfig, CODIMethod, codi_loss
    from hf_icot.methods.latent_batches import LatentRenderer
    from hf_icot.methods.latent_forward import LatentProjection, attach_projection

    sys.path.insert(0, str(codi_repo / "src"))  # their checkout, not installable here: model.py imports its neighbours
    module = load_module(codi_repo / "src" / "model.py", "their_codi")
    loader = module.AutoModelForCausalLM.from_pretrained

    class Float32Loader:  # CODI loads float16 (bfloat16 with --bf16): float32 for the comparison
        @staticmethod
        def from_pretrained(*args, **kwargs):
            kwargs["torch_dtype"] = torch.float32
            kwargs.pop("resume_download", None)
            return loader(*args, **kwargs)

    module.AutoModelForCausalLM = Float32Loader
    folder = work / "gpt2-tiny"  # its name says gpt2: CODI finds GPT-2's embeddings by the model's name (a temp dir)
    tiny_gpt2(len(tokenizer)).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    method = CODIMethod(CODISchedule(num_latent=3), CODIConfig(use_prj=True, prj_dim=64, prj_dropout=0.0))
    model_args = SimpleNamespace(model_name_or_path=str(folder), full_precision=True, train=True, token=None)
    training_args = SimpleNamespace(
        bf16=False, num_latent=3, use_lora=False, use_prj=True, prj_dim=64, prj_dropout=0.0, prj_no_ln=False,
        print_loss=False, ref_loss_factor=1.0, distill_loss_div_std=False, distill_loss_type="smooth_l1",
        distill_loss_factor=1.0, fix_attn_mask=False, restore_from="", print_ref_model_stats=False,
    )  # fmt: skip
    torch.manual_seed(1)
    theirs = module.CODI(model_args, training_args, lora_config=None)
    renderer = method.renderer = LatentRenderer(tokenizer)
    schedule = method.schedule

    def ours_like(their_model):
        lm = copy.deepcopy(their_model.codi)
        projection = LatentProjection(64, 64, 0.0, layer_norm=True)
        projection.load_state_dict(their_model.prj.state_dict())
        attach_projection(lm, projection)
        return lm

    def their_inputs(batch):
        """CODI's tensors from our batch: the encoder is the question, <eos> and the start marker; the decoder is
        the end marker, <eos>, '####', the answer and <eos>; positions in CODI's convention (the answer's first
        token)."""
        ids, start = batch["input_ids"], renderer.tokens.start
        start_at = int((ids[0] == start).nonzero()[0])
        end_at = start_at + 1 + schedule.num_latent
        decoder = ids[:, end_at:]
        return {
            "encoder_input_ids": ids[:, : start_at + 1],
            "encoder_attention_mask": torch.ones_like(ids[:, : start_at + 1]),
            "decoder_input_ids": decoder,
            "labels": decoder,
            "model_answer_position": batch["answer_positions"] - end_at + 1,
            "ref_input_ids": batch["teacher_input_ids"],
            "ref_attention_mask": batch["teacher_attention_mask"],
            "ref_labels": batch["teacher_labels"],
            "ref_answer_position": batch["teacher_answer_positions"] + 1,
        }

    def render(examples):
        return method.render(examples, 0, True, collator=None)[0]

    # 1. One batch, the same weights.
    ours = ours_like(theirs)
    batch = render(batches[0])
    their_out = theirs(**their_inputs(batch))
    our_out = codi_loss(ours, latent_id=renderer.tokens.latent, config=method.config, **batch)
    their_out["loss"].backward()
    our_out.loss.backward()
    terms = {
        "student_ce": (their_out["ce_loss"], our_out.student_ce.item()),
        "distill": (their_out["distill_loss"], our_out.distill.item()),
        "teacher_ce": (their_out["ref_ce_loss"], our_out.teacher_ce.item()),
        "loss": (their_out["loss"].item(), our_out.loss.item()),
    }
    check = {name: {"theirs": a, "ours": b, "gap": abs(a - b)} for name, (a, b) in terms.items()}
    check["gradient_gap"] = largest_gradient_gap(theirs, ours, (("codi.", ""), ("prj.", "latent_projection.")))

    # 2. Training, the same batches and AdamW on each side.
    torch.manual_seed(1)
    theirs = module.CODI(model_args, training_args, lora_config=None)
    ours = ours_like(theirs)
    curves = {"theirs": [], "ours": []}
    seconds = {"theirs": 0.0, "ours": 0.0}
    optimizers = [torch.optim.AdamW(m.parameters(), lr=1e-3, weight_decay=0.0) for m in (theirs, ours)]
    for step in range(steps):
        batch = render(batches[step % len(batches)])
        for side, optimizer in zip(("theirs", "ours"), optimizers):
            start = time.perf_counter()
            optimizer.zero_grad()
            if side == "theirs":
                loss = theirs(**their_inputs(batch))["loss"]
            else:
                loss = codi_loss(ours, latent_id=renderer.tokens.latent, config=method.config, **batch).loss
            loss.backward()
            optimizer.step()
            seconds[side] += time.perf_counter() - start
            curves[side].append(loss.item())
    return {"check": check, "curves": curves, "seconds": seconds}


def plot(summary: dict, path: Path) -> None:
    from hf_icot.studies.report import mark_steps, pyplot, save_figure

    plt = pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    for ax, name, title in ((axes[0], "coconut", "Coconut, stages 0-3"), (axes[1], "codi", "CODI, 3 thoughts")):
        curves = summary[name]["curves"]
        ax.plot(curves["theirs"], label="their model class", linewidth=3, alpha=0.5)
        ax.plot(curves["ours"], label="hf_icot", linewidth=1, linestyle="--", color="black")
        if name == "coconut":
            mark_steps(ax, summary[name]["stage_starts"], label="stage boundary")
        ax.set_xlabel("optimizer step")
        ax.set_ylabel("training loss")
        ax.set_title(title)
        ax.legend()
    fig.suptitle("The same weights, batches and AdamW: their model classes and hf_icot's losses")
    save_figure(fig, path)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--coconut", type=Path, required=True, help="a checkout of facebookresearch/coconut")
    parser.add_argument("--codi", type=Path, required=True, help="a checkout of zhenyi4/codi")
    parser.add_argument("--steps-per-stage", type=int, default=100, help="Coconut's steps per stage (CODI: 4x)")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--out", type=Path, default=HERE)
    args = parser.parse_args()
    for flag, path, needed in (("--coconut", args.coconut, "coconut.py"), ("--codi", args.codi, "src/model.py")):
        if not (path / needed).is_file():
            sys.exit(f"error: {flag} {str(path)!r} has no {needed}; give a checkout of the repository.")
    import torch

    torch.set_num_threads(1)
    tokenizer, batches = task_batches(n_batches=50, batch_size=args.batch_size)
    args.out.mkdir(parents=True, exist_ok=True)
    summary = {
        "coconut": coconut_side(args.coconut, tokenizer, batches, args.steps_per_stage),
        "codi": codi_side(args.codi, tokenizer, batches, 4 * args.steps_per_stage, Path(tempfile.mkdtemp())),
    }
    for name in ("coconut", "codi"):
        curves = summary[name]["curves"]
        summary[name]["largest_curve_gap"] = max(abs(a - b) for a, b in zip(curves["theirs"], curves["ours"]))
        print(f"{name}: one batch {json.dumps(summary[name]['check'])}")
        print(
            f"{name}: {len(curves['ours'])} steps, final loss theirs {curves['theirs'][-1]:.5f} ours "
            f"{curves['ours'][-1]:.5f}, largest gap over the run {summary[name]['largest_curve_gap']:.2e}; seconds "
            f"theirs {summary[name]['seconds']['theirs']:.1f} ours {summary[name]['seconds']['ours']:.1f}"
        )
    (args.out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    plot(summary, args.out / "curves.png")


if __name__ == "__main__":
    main()
