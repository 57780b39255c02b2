"""Stepwise implicit chain of thought (ICoT) on GPT-2 or any causal LM: train, evaluate, save, card, push.

Examples (from the repository root)::

    # quickstart on one CPU: a tiny GPT-2-architecture model from scratch on 4-sparse parity, 2-5 minutes on 2 cores
    accelerate launch --config_file recipes/accelerate/cpu.yaml recipes/icot_gpt2.py \\
        --config recipes/configs/quickstart.yaml
    # the reference setting: GPT-2 small, 4x4 multiplication (one GPU), then 8 GPUs with DDP
    python recipes/icot_gpt2.py --config recipes/configs/icot_gpt2_4x4.yaml
    accelerate launch --config_file recipes/accelerate/ddp.yaml recipes/icot_gpt2.py \\
        --config recipes/configs/icot_gpt2_4x4.yaml
    # LoRA on a local model, adapter saved alone and pushed (base named by its Hub id)
    python recipes/icot_gpt2.py --config recipes/configs/icot_gpt2_4x4.yaml --model_name_or_path ./gpt2 \\
        --base_model_hub_id openai-community/gpt2 --use_peft --push_to_hub --hub_model_id USER/gpt2-icot-4x4-lora
    # continue a run that stopped (killed, preempted) from its last complete checkpoint
    python recipes/icot_gpt2.py --config recipes/configs/icot_gpt2_4x4.yaml --resume_from_checkpoint true
    # retry a push that failed, without retraining
    python -m hf_icot.publishing.hub push OUTPUT_DIR --repo USER/NAME

``--config`` gives defaults, flags override them; ``--help`` lists every option. The data come from a Hub dataset
repo or a folder written by ``python -m datasets_builder build`` (``--dataset_name_or_path``), or are built on the fly
from ``--task`` and ``--task_args``. The run folder ends up holding the model (safetensors), tokenizer,
``training_curves.png``, ``training_log.json``, ``eval_results.json`` and the model card ``README.md``. A new run
into a folder that holds another run is refused: continue it with ``--resume_from_checkpoint true`` (or a checkpoint's
path), or start over with ``--overwrite_output_dir``.
"""

from __future__ import annotations

import logging
from typing import Any

from hf_icot.command_line.arguments import ModelArguments, ScriptArguments
from hf_icot.command_line.arguments import parse_recipe_args as parse_args  # --config file.yaml plus flags
from hf_icot.command_line.recipe import run_main
from hf_icot.publishing.hub import PushError  # light: the Hub client is imported only when pushing

logger = logging.getLogger("icot_gpt2")


def main(script_args: ScriptArguments, training_args: Any, model_args: ModelArguments) -> dict[str, float]:
    """Run the recipe; returns the final evaluation metrics (``<split>/<mode>/answer_em``, speeds).

    Raises:
        ValueError: bad input (one sentence saying what to change), before any training where possible.
        hf_icot.publishing.hub.PushError: the final upload failed; the output folder is complete and the message gives
            the command that retries it.
    """
    from datasets_builder import build_dataset
    from hf_icot.command_line.recipe import RecipeRun
    from hf_icot.evaluation.generation_accuracy import accuracy_line
    from hf_icot.modeling.loading import load_model_for_run
    from hf_icot.training.config import schedule_from_config
    from hf_icot.training.outputs import check_push_possible
    from hf_icot.training.trainer import ICoTTrainer

    with RecipeRun(training_args) as run:
        # The run folder is pushed at the end, card and adapter handling included; Trainer's own push stays off.
        push_to_hub, training_args.push_to_hub = training_args.push_to_hub, False
        if push_to_hub:
            adapter = model_args.use_peft and not model_args.merge_adapter
            base = model_args.base_model_hub_id or model_args.model_name_or_path
            check_push_possible(training_args.hub_model_id, training_args.hub_token, base if adapter else None)
        schedule = schedule_from_config(training_args)

        # Step 1: data, built on the fly or loaded (a folder or the Hub), with the --eval_files splits.
        data = run.load_data(script_args, build=build_dataset)
        # Step 2: model and tokenizer, ready for the curriculum's layout (placeholder, hint tokens); LoRA.
        model, tokenizer = load_model_for_run(model_args, schedule.layout, data.dataset)

        # Step 3: train with the curriculum.
        try:
            trainer = run.track(ICoTTrainer(model=model, args=training_args, train_dataset=data.train,
                                            eval_dataset=data.evaluation_sets.get("validation"),
                                            processing_class=tokenizer, schedule=schedule))  # fmt: skip
        except ValueError as error:
            raise ValueError(f"{model_args.name} cannot train on this data: {error}") from None
        if trainer.is_fsdp_enabled and model_args.merge_adapter:
            raise ValueError(
                "--merge_adapter is not supported under FSDP; save the adapter, then merge it in one process."
            )
        selection = trainer.add_best_epoch_selection(data.evaluation_sets) if training_args.select_best_epoch else None
        trainer.train(resume_from_checkpoint=run.resume_from)

        # Step 4: implicit and explicit answers (and the hint=k modes of --eval_modes) on every evaluation split.
        metrics = trainer.evaluate_generation(data.evaluation_sets, metric_key_prefix="")
        if selection is not None:  # the model is the selected epoch's; its per-epoch table goes with the results
            metrics.update(selection.flat_metrics())

        # Step 5: model, curves, card and eval_results.json into the run folder, then the push.
        weights_kind = trainer.save_run(model_args.merge_adapter, model_args.base_model_hub_id)
        trainer.create_model_card(
            metrics=metrics,
            dataset=data.info,
            example=next(iter(data.evaluation_sets.values()))[0],
            weights_kind=weights_kind,
            base_model=None if model_args.scratch_model else model_args.base_model_hub_id or model_args.name,
            license=script_args.card_license,
            selection=selection.summary() if selection is not None else None,
        )
        if push_to_hub:
            url = trainer.push_to_hub()
            if url:
                logger.info("pushed %s to %s", training_args.output_dir, url)
        if trainer.is_world_process_zero():  # the run's result, last on the screen
            print(accuracy_line(metrics), flush=True)
    return metrics


if __name__ == "__main__":
    run_main(main, parse_args, errors=(ValueError, PushError))
