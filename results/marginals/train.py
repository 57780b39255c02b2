"""The "marginals before conditionals" study: a small GPT-2 from scratch fits the K-fold ambiguity task (B, z) -> A,
and the learning-dynamics diagnostics record how (:mod:`hf_icot.diagnostics`).

Examples (from the repository root)::

    # the study's setting: K = 10, n_b = 1,000, 4 x 128 GPT-2, AdamW 1e-3, batch 128, constant lr
    python results/marginals/train.py --config results/marginals/configs/marginals.yaml \\
        --output_dir outputs/marginals/k10
    # a sweep point: K = 20 at the same n_b, another seed
    python results/marginals/train.py --config results/marginals/configs/marginals.yaml \\
        --task_args '{"k": 20, "seed": 1}' --seed 1 --output_dir outputs/marginals/k20_s1
    # the study's A -> B (no selector, each A mapped to its B), stopped once the training loss is below 0.05
    python results/marginals/train.py --config results/marginals/configs/marginals.yaml \\
        --task_args '{"direction": "a_to_b", "distinct_first_chars": false}' --measurements group_accuracy \\
        --stop_below_loss 0.05 --output_dir outputs/marginals/a_to_b
    # the base run trained with layer 0's head 2 zeroed from step 64 on (its output contributes nothing)
    python results/marginals/train.py --config results/marginals/configs/marginals.yaml \\
        --ablate_heads 0:2 --ablate_from_step 64 --output_dir outputs/marginals/ablated
    # the study's optimiser schedule: 500 warm-up steps, cosine decay over max_steps, gradient clipping at 1.0
    python results/marginals/train.py --config results/marginals/configs/marginals_study_schedule.yaml \\
        --output_dir outputs/marginals/cos

``--config`` gives defaults, flags override them (``--help`` lists every option). Sequences are the study's
``<bos> B <sep> z <sep> A <eos>`` with loss on A and the final ``<eos>`` (:mod:`hf_icot.data.answer_only`); training is
the plain ``transformers.Trainer`` (there is no chain of thought to remove). The directions without a selector in the
question (``b_to_a``, ``a_to_b``) measure no Δz and no selector attention; those whose K rows of a base share one
answer (``az_to_b``, ``a_to_b``) have no candidate loss (the K candidates coincide) and so no τ. The run folder holds the model
(safetensors), ``training_log.json`` (training loss every ``logging_steps``), ``diagnostics.csv`` (one row every
``diagnostics_interval`` steps) and ``run.json`` (the task, sizes, log K and τ). ``results/marginals/make_results.py``
turns run folders into tables and plots.
"""

from __future__ import annotations

import logging
import math
import os
from dataclasses import asdict, dataclass, field
from typing import Any

from hf_icot.command_line.parsing import parse_config, parse_mapping
from hf_icot.command_line.recipe import run_main
from hf_icot.diagnostics.candidates import diagnostic_rows
from hf_icot.diagnostics.learning_dynamics import check_measurements
from hf_icot.diagnostics.transition import StopAfterTransition, StopBelowLoss, transition_step
from hf_icot.training.config import RunArguments

logger = logging.getLogger("marginals")

#: The study's model as a GPT-2 config: 4 layers, 4 heads, d_model 128, d_mlp 512, GELU, learned positions, 32
#: positions. Read from its code (a TransformerLens HookedTransformer): no dropout, an unembedding of its own (not
#: tied to the embedding) and weights drawn with std 0.8 / sqrt(d_model) (TransformerLens' default), not GPT-2's 0.02.
STUDY_MODEL = {"n_layer": 4, "n_head": 4, "n_embd": 128, "n_inner": 512, "activation_function": "gelu"}
STUDY_MODEL.update(resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, n_positions=32)
STUDY_MODEL.update(tie_word_embeddings=False, initializer_range=round(0.8 / 128**0.5, 4))


@dataclass
class MarginalsArguments:
    """What the marginals recipe runs besides training: the task, the model and the diagnostics."""

    task_args: dict | str | None = field(
        default=None,
        metadata={"help": "Ambiguity task parameters (datasets_builder.tasks.ambiguity.Params) as a mapping."},
    )
    scratch_model: dict | str | None = field(
        default=None,
        metadata={"help": "GPT-2 config fields of the model from scratch; default: the study's model (STUDY_MODEL)."},
    )
    diagnostics_interval: int = field(default=50, metadata={"help": "Steps between diagnostic measurements."})
    measurements: list[str] = field(
        default_factory=lambda: ["z_shuffle_gap", "candidate_loss", "group_accuracy", "selector_attention"],
        metadata={"help": "What the diagnostics measure every interval (hf_icot.diagnostics.MEASUREMENTS)."},
    )
    final_head_ablation: bool = field(
        default=True,
        metadata={"help": "Zero- and mean-ablate every head of the final model (ablation.json; costly every step)."},
    )
    diagnostic_examples: int = field(
        default=200, metadata={"help": "Examples (whole bases, K rows each) the diagnostics measure on."}
    )
    hessian_interval: int = field(
        default=0, metadata={"help": "Steps between Hessian-extreme measurements (0: never; they are costly)."}
    )
    tau_fraction: float = field(
        default=0.5, metadata={"help": "τ is the first measurement where candidate loss < tau_fraction * log K."}
    )
    stop_below_loss: float | None = field(
        default=None,
        metadata={
            "help": "Stop training 5 logging intervals after the logged training loss first falls below this (for "
            "the directions without a τ); unset: no such stop."
        },
    )
    ablate_heads: list[str] = field(
        default_factory=list,
        metadata={
            "help": "Heads 'layer:head' (0-based) whose output is zeroed during training "
            "(hf_icot.diagnostics.HeadAblationCallback); none by default."
        },
    )
    ablate_from_step: int = field(
        default=0, metadata={"help": "The global step from which ablate_heads are zeroed (0: from the start)."}
    )
    stop_after_tau: float | None = field(
        default=None,
        metadata={
            "help": "Stop training this fraction of τ after τ (at least 5 diagnostic intervals later) to spare the "
            "steps after the transition; unset: train all max_steps."
        },
    )

    def __post_init__(self) -> None:
        self.task_args = parse_mapping("task_args", self.task_args) or {}
        self.scratch_model = {**STUDY_MODEL, **(parse_mapping("scratch_model", self.scratch_model) or {})}
        if self.diagnostics_interval < 1:
            raise ValueError(f"diagnostics_interval={self.diagnostics_interval} is not allowed; it must be >= 1.")
        if self.hessian_interval < 0:
            raise ValueError(f"hessian_interval={self.hessian_interval} is not allowed; use 0 (off) or >= 1.")
        if not 0 < self.tau_fraction < 1:
            raise ValueError(f"tau_fraction={self.tau_fraction} is not allowed; it must lie in (0, 1).")
        if self.stop_below_loss is not None and self.stop_below_loss <= 0:
            raise ValueError(
                f"stop_below_loss={self.stop_below_loss} is not allowed; give a loss > 0 or leave it unset."
            )
        from hf_icot.diagnostics.training_ablation import parse_heads

        parse_heads(self.ablate_heads)  # the format here; the range against the model once it is built
        if self.ablate_from_step < 0 or (self.ablate_from_step and not self.ablate_heads):
            raise ValueError(
                f"ablate_from_step={self.ablate_from_step} is not allowed; give a step >= 0, with --ablate_heads."
            )
        if self.stop_after_tau is not None and self.stop_after_tau < 0:
            raise ValueError(
                f"stop_after_tau={self.stop_after_tau} is not allowed; give a fraction >= 0 or leave it unset."
            )


def run_record(
    args: MarginalsArguments,
    training_args: Any,
    dataset_info: dict,
    train: Any,
    tau: int | None,
    steps: int,
    model: Any,
) -> dict[str, Any]:
    """``run.json``: the task and its sizes, log K, τ, the optimiser, the steps trained, the model and the
    diagnostics' settings."""
    k = len(train) // len(set(train["group"]))
    return {
        "task": {"config": dataset_info["config"], **args.task_args},
        "k": k,
        "n_bases": len(set(train["group"])),
        "dataset_size": len(train),
        "log_k": math.log(k),
        "tau": tau,
        "tau_fraction": args.tau_fraction,
        "learning_rate": training_args.learning_rate,
        "batch_size": training_args.per_device_train_batch_size * training_args.gradient_accumulation_steps,
        "schedule": {
            "lr_scheduler_type": str(
                getattr(training_args.lr_scheduler_type, "value", training_args.lr_scheduler_type)
            ),
            "warmup_steps": training_args.warmup_steps,
            "max_grad_norm": training_args.max_grad_norm,
            "max_steps": training_args.max_steps,
        },
        "seed": training_args.seed,
        "max_steps": steps,
        "model": {**args.scratch_model, "parameters": model.num_parameters()},
        "diagnostics": asdict(args),
    }


def main(args: MarginalsArguments, training_args: RunArguments) -> dict[str, Any]:
    """Train one run of the study and write its folder (see the module docstring); returns ``run.json``'s content.

    Raises:
        ValueError: bad input (one sentence saying what to change), before any training.
    """
    from transformers import AutoModelForCausalLM, DataCollatorForSeq2Seq

    from datasets_builder import build_dataset
    from hf_icot.command_line.recipe import RecipeRun
    from hf_icot.data.answer_only import answer_only_tokenizer, encode_answer_only
    from hf_icot.diagnostics import HeadAblationCallback, LearningDynamicsCallback, parse_heads
    from hf_icot.modeling.loading import scratch_config
    from hf_icot.publishing.run_files import TRAINING_LOG_FILE
    from hf_icot.runs.checkpoints import CheckpointedTrainer

    with RecipeRun(training_args) as run:
        # Step 1: the task, its tokenizer and the study's layout.
        check_measurements(args.task_args.get("direction", "bz_to_a"), args.measurements)
        dataset, dataset_info = build_dataset("ambiguity", args.task_args)
        tokenizer = answer_only_tokenizer(dataset)
        train = encode_answer_only(dataset["train"], tokenizer)
        k = len(train) // len(set(train["group"]))

        # Step 2: the model from scratch; Step 3: train with the diagnostics on a fixed set of whole bases.
        model = AutoModelForCausalLM.from_config(scratch_config(args.scratch_model, tokenizer))
        diagnostics = LearningDynamicsCallback(
            model,
            diagnostic_rows(train, args.diagnostic_examples, k),
            pad_token_id=tokenizer.pad_token_id,
            interval=args.diagnostics_interval,
            measurements=args.measurements,
            hessian_interval=args.hessian_interval or None,
            csv_path=os.path.join(training_args.output_dir, "diagnostics.csv"),
            group_accuracy_path=os.path.join(training_args.output_dir, "group_accuracy.csv"),
            seed=training_args.seed,
        )
        threshold = args.tau_fraction * math.log(k)
        callbacks = [diagnostics]
        if args.ablate_heads:  # first, so that a measurement at the removal step already sees it
            heads = parse_heads(args.ablate_heads)
            callbacks.insert(0, HeadAblationCallback(model, heads, args.ablate_from_step))
        if args.stop_after_tau is not None and "candidate_loss" in args.measurements:
            callbacks.append(
                StopAfterTransition(diagnostics, threshold, args.stop_after_tau, 5 * args.diagnostics_interval)
            )
        if args.stop_below_loss is not None:
            callbacks.append(StopBelowLoss(args.stop_below_loss, 5 * training_args.logging_steps))
        trainer = run.track(CheckpointedTrainer(
            model=model, args=training_args, train_dataset=train.select_columns(["input_ids", "labels"]),
            data_collator=DataCollatorForSeq2Seq(tokenizer, label_pad_token_id=-100), processing_class=tokenizer,
            callbacks=callbacks,
        ))  # fmt: skip
        diagnostics.trainer = trainer
        trainer.train(resume_from_checkpoint=run.resume_from)

        # Step 4: τ from the candidate-loss series, the run's record and the model.
        tau = transition_step(diagnostics.rows, threshold) if "candidate_loss" in args.measurements else None
        record = run_record(args, training_args, dataset_info, train, tau, trainer.state.global_step, model)
        records = {TRAINING_LOG_FILE: trainer.state.log_history}
        if args.final_head_ablation:
            from hf_icot.diagnostics import head_ablation

            increases = head_ablation(model, diagnostics.examples, pad_token_id=tokenizer.pad_token_id)
            records["ablation.json"] = {mode: array.tolist() for mode, array in increases.items()}
        trainer.save_model()
        run.write_records({**records, "run.json": record})
        logger.info("K=%d D=%d tau=%s", k, len(train), tau)
    return record


if __name__ == "__main__":
    run_main(main, lambda: parse_config((MarginalsArguments, RunArguments)))
