"""The semiautomata internalization study: small GPT-2s from scratch simulate a semiautomaton for T steps, trained end
to end, with the full CoT (every state), with a left / right / inductive curriculum (``Staged``) or with a mixture
over CoT lengths with length hints (``Mixture``), then evaluated on ``test`` and every ``test_ood_*`` split.

After "Learning through Internalization" (Tsilivis, Joshi, Medvedev, Kempe, Srebro); no public code, so the setting
here is ours (results/semiautomata/README.md states every choice). Examples (from the repository root)::

    # the CPU scale's base run: left curriculum on the counter C_7, T = 16, a 4-layer GPT-2 at 200 k parameters
    python recipes/semiautomata.py --config recipes/configs/semiautomata_cpu.yaml
    # the other regimes on the same data and model (every run of the study: results/semiautomata/run_all.sh)
    python recipes/semiautomata.py --config recipes/configs/semiautomata_cpu.yaml --schedule full_cot \\
        --output_dir outputs/semiautomata/c7_full_cot
    python recipes/semiautomata.py --config recipes/configs/semiautomata_cpu.yaml --schedule mixture \\
        --removal_unit step --length_hint true --eval_modes hint=0 hint=16 --output_dir outputs/semiautomata/c7_mix
    # deep and narrow at the same budget; another automaton
    python recipes/semiautomata.py --config recipes/configs/semiautomata_cpu.yaml --scratch_model '{"depth": 16}'
    python recipes/semiautomata.py --config recipes/configs/semiautomata_cpu.yaml --task_args '{"modulus": 11}'

``--config`` gives defaults, flags override them (``--help`` lists every option; the same flags as
``recipes/icot_gpt2.py``). ``--scratch_model`` takes GPT-2 fields, plus ``depth`` and ``param_budget``: the width is
then chosen by :func:`hf_icot.model_sizing.width_for_budget` so that the real parameter count is within 5% of the
budget (``width_step``: widths are its multiples; default ``n_head``). Besides what ``icot_gpt2.py`` leaves, the run
folder holds ``model_size.json`` (depth, width, budget, real count), ``schedule.json``, ``stages.json``,
``stage_metrics.json`` (the generation accuracy at the end of every curriculum stage, on ``--generation_eval_examples``
of each evaluation split) and ``probes.json`` (:func:`hf_icot.diagnostics.probes.state_probe_map` on the ``test``
split: the state after step t decoded from each layer at the t-th input symbol, after training and, as a control, at
initialisation), with ``task_args.json`` and ``splits.json`` (examples and majority-answer share per evaluation split)
for the analysis.
"""

from __future__ import annotations

import json
import logging
import os
import sys
from collections import Counter
from typing import Any

from hf_icot.arguments import ModelArguments, ScriptArguments
from hf_icot.config import parse_recipe_args as parse_args  # --config file.yaml plus flags

logger = logging.getLogger("semiautomata")

TASK = "semiautomaton"
#: ``--scratch_model`` keys this recipe reads itself (the rest are GPT-2 config fields).
SIZING_KEYS = ("depth", "param_budget", "width_step")


def size_model(fields: dict[str, Any], vocab_size: int) -> tuple[dict[str, Any], dict[str, Any]]:
    """The GPT-2 fields with ``depth`` / ``param_budget`` turned into ``n_layer`` / ``n_embd``, and what was chosen.

    Raises:
        ValueError: a family other than GPT-2 with a budget, ``depth`` and ``n_layer`` both given, a budget without a
            depth, or a budget too small for the depth (one sentence naming both).
    """
    from hf_icot.model_sizing import width_for_budget

    fields = dict(fields)
    depth, budget, step = (fields.pop(key, None) for key in SIZING_KEYS)
    if budget is None:
        if depth is not None:
            if "n_layer" in fields:
                raise ValueError("--scratch_model gives both depth and n_layer; give one.")
            fields["n_layer"] = depth
        return fields, {}
    if fields.get("model_type", "gpt2") != "gpt2" or depth is None or "n_layer" in fields or "n_embd" in fields:
        raise ValueError(
            "--scratch_model param_budget sizes a GPT-2 from depth (not n_layer / n_embd); give depth and leave "
            "model_type unset or gpt2."
        )
    gpt2 = {key: value for key, value in fields.items() if key != "model_type"}
    width, count = width_for_budget(int(depth), int(budget), step=step, vocab_size=vocab_size, **gpt2)
    fields.update(n_layer=int(depth), n_embd=width)
    return fields, {"depth": int(depth), "width": width, "param_budget": int(budget), "parameters": count}


def majority_share(answers: list[str]) -> dict[str, Any]:
    """The examples, and the share of the most frequent answer among them (what always guessing it scores)."""
    counts = Counter(answers)
    return {"examples": len(answers), "majority_answer_share": max(counts.values()) / len(answers)}


def main(script_args: ScriptArguments, training_args: Any, model_args: ModelArguments) -> dict[str, float]:
    """Run one semiautomata experiment; returns the final metrics (``<split>/<mode>/answer_em``, …).

    Raises:
        ValueError: bad input (an unknown automaton or split, a budget too small for the depth, …), one sentence
            saying what to change, before any training.
    """
    from transformers import set_seed

    from hf_icot.config import schedule_from_config
    from hf_icot.data import load_run_data, run_splits
    from hf_icot.diagnostics.probes import state_probe_map
    from hf_icot.loading import load_model_and_tokenizer, longest_hint
    from hf_icot.run_folder import prepare_run_folder
    from hf_icot.runtime import use_all_cpu_threads
    from hf_icot.tokenization import build_word_level_tokenizer
    from hf_icot.trainer import ICoTTrainer

    use_all_cpu_threads(on_cpu=training_args.device.type == "cpu")
    if script_args.task is not None and script_args.task != TASK:
        raise ValueError(f"--task {script_args.task!r} is not this study's; semiautomata.py trains on --task {TASK}.")
    if model_args.scratch_model is None:
        raise ValueError("semiautomata.py trains models from scratch; give --scratch_model (GPT-2 fields).")
    resume_from = prepare_run_folder(training_args)  # before any work: never over another run by accident
    set_seed(training_args.seed)
    schedule = schedule_from_config(training_args)

    # Step 1: data, built on the fly (the automaton, T, the OOD laws come from --task_args) or loaded.
    if script_args.task is not None:
        from datasets_builder import build_dataset

        dataset, dataset_info = build_dataset(TASK, script_args.task_args)
    else:
        dataset, dataset_info = load_run_data(script_args.dataset_name_or_path, script_args.dataset_config)
    train, evaluation_sets = run_splits(
        dataset, script_args.eval_splits, script_args.max_train_examples, script_args.max_eval_examples
    )
    dataset_info["splits"] = {name: len(split) for name, split in dataset.items()}

    # Step 2: the model at its depth and parameter budget (the count needs the vocabulary of the run's tokenizer).
    vocab = len(build_word_level_tokenizer(dataset, max_hint_length=longest_hint(schedule.layout, dataset["train"])))
    model_args.scratch_model, sizing = size_model(model_args.scratch_model, vocab)
    model, tokenizer = load_model_and_tokenizer(model_args, schedule.layout, dataset)
    sizing = {**sizing, "n_layer": model.config.n_layer, "n_embd": model.config.n_embd}
    sizing["parameters"] = model.num_parameters()  # the built model's own count (equal to the helper's)
    # The probes' control: early steps have few distinct prefixes, which even an untrained model separates linearly.
    probe_split = evaluation_sets.get("test", next(iter(evaluation_sets.values())))
    probes_at_init = state_probe_map(model, tokenizer, probe_split, seed=training_args.seed)

    # Step 3: train; every stage end measures generation accuracy on each evaluation split (implicit, explicit).
    trainer = ICoTTrainer(
        model=model,
        args=training_args,
        train_dataset=train,
        eval_dataset=evaluation_sets,
        processing_class=tokenizer,
        schedule=schedule,
    )
    trainer.train(resume_from_checkpoint=resume_from)

    # Step 4: every split in implicit, explicit and the hint modes; Step 5: where the states are (linear probes).
    metrics = trainer.evaluate_splits(evaluation_sets)
    probes = state_probe_map(trainer.model, tokenizer, probe_split, seed=training_args.seed)
    probes["accuracy_at_init"] = probes_at_init["accuracy"]

    # Step 6: model, curves, card; the study's own records beside them.
    weights_kind = trainer.save_run()
    trainer.create_model_card(
        metrics=metrics,
        dataset=dataset_info,
        example=next(iter(evaluation_sets.values()))[0],
        weights_kind=weights_kind,
        license=script_args.card_license,
    )
    if trainer.is_world_process_zero():
        records = {
            "model_size.json": sizing,
            "stages.json": trainer.schedule.describe(trainer.state.max_steps),
            "stage_metrics.json": {str(stage): values for stage, values in trainer.stage_metrics.items()},
            "probes.json": probes,
            "task_args.json": script_args.task_args or {},
            "schedule.json": trainer.schedule.to_dict(),
            # chance for an answer-only guesser: the most frequent final state of each split
            "splits.json": {name: majority_share(split["answer"]) for name, split in evaluation_sets.items()},
        }
        for name, record in records.items():
            with open(os.path.join(training_args.output_dir, name), "w", encoding="utf-8") as stream:
                json.dump(record, stream, indent=2, default=str)
    trainer.end_processes()
    return metrics


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    try:
        main(*parse_args())
    except ValueError as error:
        sys.exit(f"error: {error}")
