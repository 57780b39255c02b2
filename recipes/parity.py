"""The parity theory models: Log-ICoT on the gated multi-layer transformer (A), the one-layer linear-attention model
(B), the mixture MLP (C), their baselines, and the same curricula on a standard GPT-2 from scratch.

Examples (from the repository root)::

    # A: Log-ICoT (log2 k stages) on the gated transformer, n = 30, k = 16, four layers
    python recipes/parity.py --config recipes/configs/parity_log_icot.yaml
    # its baselines on the same model and budget: token-by-token Stepwise, and end to end (no CoT)
    python recipes/parity.py --config recipes/configs/parity_log_icot.yaml --schedule stepwise \\
        --remove_per_epoch 0.75 --removal_unit token --output_dir outputs/parity/a_stepwise
    # B: one-layer linear attention, chain CoT removed from the left; C: the mixture MLP
    python recipes/parity.py --config recipes/configs/parity_linear_attention.yaml
    python recipes/parity.py --config recipes/configs/parity_mlp_mixture.yaml

``--config`` gives defaults, flags override them (``--help`` lists every option; the same flags as
``recipes/icot_gpt2.py``). The model is ``--scratch_model`` with a ``model_type`` of :mod:`hf_icot.models`
(``log_icot_parity``, ``linear_attention_parity``, ``parity_mlp``) or any causal LM family (``gpt2``). The theory
models round their attention weights (:class:`hf_icot.models.RoundingCallback`: A to integers after every step, B to
halves at every stage end); every causal-LM run logs teacher-forced answer accuracy every ``eval_steps``
(:mod:`hf_icot.diagnostics.answer_accuracy`). The run folder holds what ``icot_gpt2.py`` leaves plus ``stages.json``;
``results/parity/make_results.py`` turns run folders into tables and plots.
"""

from __future__ import annotations

import json
import logging
import os
import sys
from typing import Any

from hf_icot.arguments import ModelArguments, ScriptArguments
from hf_icot.config import parse_recipe_args as parse_args  # --config file.yaml plus flags

logger = logging.getLogger("parity")

#: How each theory model is rounded: (grid, when).
ROUNDING = {"log_icot_parity": (1.0, "step"), "linear_attention_parity": (0.5, "stage")}


def main(script_args: ScriptArguments, training_args: Any, model_args: ModelArguments) -> dict[str, float]:
    """Run one parity experiment; returns the final metrics.

    Raises:
        ValueError: bad input (one sentence saying what to change), before any training.
    """
    from transformers import set_seed

    from hf_icot.config import schedule_from_config
    from hf_icot.data import load_run_data, run_splits
    from hf_icot.diagnostics.answer_accuracy import AnswerAccuracyCallback
    from hf_icot.loading import load_model_and_tokenizer
    from hf_icot.models import RoundingCallback, check_parity_data
    from hf_icot.trainer import ICoTTrainer

    set_seed(training_args.seed)
    schedule = schedule_from_config(training_args)
    model_type = (model_args.scratch_model or {}).get("model_type", "gpt2")

    # Step 1: data, built on the fly or loaded.
    if script_args.task is not None:
        from datasets_builder import build_dataset

        dataset, dataset_info = build_dataset(script_args.task, script_args.task_args)
    else:
        dataset, dataset_info = load_run_data(script_args.dataset_name_or_path, script_args.dataset_config)
    train, evaluation_sets = run_splits(
        dataset, script_args.eval_splits, script_args.max_train_examples, script_args.max_eval_examples
    )
    dataset_info["splits"] = {name: len(split) for name, split in dataset.items()}
    check_parity_data(model_type, model_args.scratch_model or {}, train)

    # The MLP is not a causal LM: it trains through the plain Trainer (hf_icot.models.parity_mlp).
    if model_type == "parity_mlp":
        from hf_icot.models.parity_mlp import train_parity_mlp

        return train_parity_mlp(training_args, schedule, model_args.scratch_model, train, evaluation_sets)

    # Step 2: model and tokenizer (word-level, with the placeholder), rounding for the theory models.
    model, tokenizer = load_model_and_tokenizer(model_args, schedule.layout, dataset)
    callbacks = []
    if model_type in ROUNDING:
        grid, at = ROUNDING[model_type]
        callbacks.append(RoundingCallback(grid=grid, at=at, schedule=schedule))

    # Step 3: train with the curriculum, measuring answer accuracy (stage layout and no CoT) as it goes.
    trainer = ICoTTrainer(
        model=model,
        args=training_args,
        train_dataset=train,
        eval_dataset=evaluation_sets.get("validation"),
        processing_class=tokenizer,
        schedule=schedule,
        callbacks=callbacks,
    )
    trainer.add_callback(AnswerAccuracyCallback(trainer, every=int(training_args.eval_steps or 100)))
    trainer.train()

    # Step 4: implicit and explicit generation on every evaluation split; Step 5: model, curves, card, stages.
    metrics = trainer.evaluate_splits(evaluation_sets)
    weights_kind = trainer.save_run()
    trainer.create_model_card(
        metrics=metrics,
        dataset=dataset_info,
        example=next(iter(evaluation_sets.values()))[0],
        weights_kind=weights_kind,
        license=script_args.card_license,
    )
    with open(os.path.join(training_args.output_dir, "stages.json"), "w", encoding="utf-8") as stream:
        json.dump(trainer.schedule.describe(trainer.state.max_steps), stream, indent=2, default=str)
    return metrics


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    try:
        main(*parse_args())
    except ValueError as error:
        sys.exit(f"error: {error}")
