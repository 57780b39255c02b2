"""The parity theory models: Log-ICoT on the gated multi-layer transformer (A), the one-layer linear-attention model
(B), the mixture MLP (C), their baselines, and the same curricula on a standard GPT-2 from scratch.

Examples (from the repository root; ``python -m results.parity.train`` runs the same)::

    # A: Log-ICoT (log2 k stages) on the gated transformer, n = 30, k = 16, four layers
    python results/parity/train.py --config results/parity/configs/parity_log_icot.yaml
    # its baselines on the same model and budget: token-by-token Stepwise, and end to end (no CoT)
    python results/parity/train.py --config results/parity/configs/parity_log_icot.yaml --schedule stepwise \\
        --remove_per_epoch 0.75 --removal_unit token --output_dir outputs/parity/a_stepwise
    # B: one-layer linear attention, chain CoT removed from the left; C: the mixture MLP
    python results/parity/train.py --config results/parity/configs/parity_linear_attention.yaml
    python results/parity/train.py --config results/parity/configs/parity_mlp_mixture.yaml

``--config`` gives defaults, flags override them (``--help`` lists every option; the same flags as
``recipes/icot_gpt2.py``, resume included). The model is ``--scratch_model`` with a ``model_type`` of
:mod:`results.parity.theory`, the study's own models (``log_icot_parity``, ``linear_attention_parity``,
``parity_mlp``: trained by :mod:`results.parity.mlp_trainer`), or any causal LM family (``gpt2``). The theory models
round their attention weights (:class:`results.parity.theory.RoundingCallback`: A to integers after every step, B to
halves at every stage end); every causal-LM run logs teacher-forced answer accuracy every ``eval_steps``
(:mod:`hf_icot.diagnostics.answer_accuracy`). The run folder holds what ``icot_gpt2.py`` leaves plus ``stages.json``
and, for the theory transformers, ``attention.json`` (each node's attention with every CoT position padded, its true
children and whether it found them: :func:`results.parity.theory.inspection.children_report`);
``results/parity/make_results.py`` turns run folders into tables and plots.
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import Any

from hf_icot.command_line.arguments import ModelArguments, ScriptArguments
from hf_icot.command_line.arguments import parse_recipe_args as parse_args  # --config file.yaml plus flags
from hf_icot.command_line.recipe import run_main

logger = logging.getLogger("parity")

#: The record of what each node of a theory transformer attends to (results.parity.theory.inspection).
ATTENTION_FILE = "attention.json"
#: How each theory model is rounded: (grid, when).
ROUNDING = {"log_icot_parity": (1.0, "step"), "linear_attention_parity": (0.5, "stage")}


def main(script_args: ScriptArguments, training_args: Any, model_args: ModelArguments) -> dict[str, float]:
    """Run one parity experiment; returns the final metrics.

    Raises:
        ValueError: bad input (one sentence saying what to change), before any training.
    """
    from datasets_builder import build_dataset
    from datasets_builder.tasks.parity import secret_support
    from hf_icot.command_line.recipe import RecipeRun
    from hf_icot.diagnostics.answer_accuracy import AnswerAccuracyCallback
    from hf_icot.modeling.loading import load_model_for_run
    from hf_icot.publishing.run_files import EVAL_RESULTS_FILE, STAGES_FILE, TRAINING_LOG_FILE
    from hf_icot.training.config import schedule_from_config
    from hf_icot.training.trainer import ICoTTrainer
    from results.parity.theory import RoundingCallback, check_parity_data  # registers the models with the Auto classes
    from results.parity.theory.inspection import children_report

    with RecipeRun(training_args) as run:
        schedule = schedule_from_config(training_args)
        model_type = (model_args.scratch_model or {}).get("model_type", "gpt2")
        # Step 1: data, built on the fly or loaded, checked against the theory model's (n, k).
        data = run.load_data(script_args, build=build_dataset)
        check_parity_data(model_type, model_args.scratch_model or {}, data.train)

        if model_type == "parity_mlp":  # not a causal LM: the plain Trainer
            from results.parity.mlp_trainer import train_parity_mlp

            metrics, trainer = train_parity_mlp(
                training_args, schedule, model_args.scratch_model, data.train, data.evaluation_sets, run.resume_from
            )
            trainer.save_model(training_args.output_dir)
            run.write_records({TRAINING_LOG_FILE: trainer.state.log_history, EVAL_RESULTS_FILE: metrics})
            return metrics

        # Step 2: model and tokenizer (word-level, with the placeholder), rounding for the theory models.
        model, tokenizer = load_model_for_run(model_args, schedule.layout, data.dataset)
        callbacks = []
        if model_type in ROUNDING:
            grid, at = ROUNDING[model_type]
            callbacks.append(RoundingCallback(grid=grid, at=at, schedule=schedule))

        # Step 3: train with the curriculum, measuring answer accuracy (stage layout and no CoT) as it goes.
        trainer = run.track(ICoTTrainer(model=model, args=training_args, train_dataset=data.train,
                                        eval_dataset=data.evaluation_sets.get("validation"),
                                        processing_class=tokenizer, schedule=schedule,
                                        callbacks=callbacks))  # fmt: skip
        trainer.add_callback(AnswerAccuracyCallback(trainer, every=int(training_args.eval_steps or 100)))
        trainer.train(resume_from_checkpoint=run.resume_from)

        # Step 4: implicit and explicit generation on every evaluation split; Step 5: model, curves, card, stages.
        metrics = trainer.evaluate_generation(data.evaluation_sets, metric_key_prefix="")
        weights_kind = trainer.save_run()
        trainer.create_model_card(
            metrics=metrics,
            dataset=data.info,
            example=next(iter(data.evaluation_sets.values()))[0],
            weights_kind=weights_kind,
            license=script_args.card_license,
        )
        records = {STAGES_FILE: run.stages(trainer)}
        if (
            model_type in ROUNDING and script_args.task
        ):  # theory transformers: what each node attends to vs its children
            records[ATTENTION_FILE] = children_report(trainer.model, secret_support(task_params(script_args)))
        run.write_records(records)
    return metrics


def task_params(script_args: ScriptArguments):
    """The parity task's parameters of this run (its secret support is a function of them)."""
    from datasets_builder import registry

    return registry.make_params("parity", **(script_args.task_args or {}))


if __name__ == "__main__":
    # Run by path (python results/parity/train.py), the study's package imports from the repository root.
    repo = str(Path(__file__).resolve().parents[2])
    if repo not in sys.path:
        sys.path.insert(1, repo)
    run_main(main, parse_args)
