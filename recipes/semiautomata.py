"""The semiautomata internalization study: small GPT-2s from scratch simulate a semiautomaton for T steps, trained end
to end, with the full CoT (every state), with a left / right / inductive curriculum (``Staged``) or with a mixture
over CoT lengths with length hints (``Mixture``), then evaluated on ``test`` and every ``test_ood_*`` split.

After "Learning through Internalization" (Tsilivis, Joshi, Medvedev, Kempe, Srebro); no public code, so the setting
here is ours (results/semiautomata/README.md states every choice). Examples (from the repository root)::

    # the CPU scale's base run: left curriculum on the counter C_7, T = 16, a 4-layer GPT-2 at 200 k parameters
    python recipes/semiautomata.py --config recipes/configs/semiautomata_cpu.yaml
    # the other regimes on the same data and model (every run of the study:
    # python -m hf_icot.studies run results/semiautomata)
    python recipes/semiautomata.py --config recipes/configs/semiautomata_cpu.yaml --schedule full_cot \\
        --output_dir outputs/semiautomata/c7_full_cot
    python recipes/semiautomata.py --config recipes/configs/semiautomata_cpu.yaml --schedule mixture \\
        --removal_unit step --length_hint true --eval_modes hint=0 hint=16 --output_dir outputs/semiautomata/c7_mix
    # deep and narrow at the same budget; another automaton
    python recipes/semiautomata.py --config recipes/configs/semiautomata_cpu.yaml --scratch_model '{"depth": 16}'
    python recipes/semiautomata.py --config recipes/configs/semiautomata_cpu.yaml --task_args '{"modulus": 11}'

``--config`` gives defaults, flags override them (``--help`` lists every option; the same flags as
``recipes/icot_gpt2.py``). ``--scratch_model`` takes GPT-2 fields, plus ``depth`` and ``param_budget``: the width is
then chosen by :func:`hf_icot.modeling.sizing.width_for_budget` so that the real parameter count is within 5% of the
budget (``width_step``: widths are its multiples; default ``n_head``). Besides what ``icot_gpt2.py`` leaves, the run
folder holds ``model_size.json`` (depth, width, budget, real count), ``schedule.json``, ``stages.json``,
``stage_metrics.json`` (the generation accuracy at the end of every curriculum stage, on ``--generation_eval_examples``
of each evaluation split) and ``probes.json`` (:func:`hf_icot.diagnostics.probes.state_probe_map` on the ``test``
split: the state after step t decoded from each layer at the t-th input symbol, after training and, as a control, at
initialisation), with ``task_args.json`` and ``splits.json`` (examples and majority-answer share per evaluation split)
for the analysis.
"""

from __future__ import annotations

import logging
from collections import Counter
from typing import Any

from hf_icot.command_line.arguments import ModelArguments, ScriptArguments
from hf_icot.command_line.arguments import parse_recipe_args as parse_args  # --config file.yaml plus flags
from hf_icot.command_line.recipe import run_main

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
    from hf_icot.modeling.sizing import width_for_budget

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
    from datasets_builder import build_dataset
    from hf_icot.command_line.recipe import RecipeRun
    from hf_icot.data.tokenization import build_word_level_tokenizer
    from hf_icot.diagnostics.probes import state_probe_map
    from hf_icot.modeling.loading import load_model_for_run, longest_hint
    from hf_icot.publishing.run_files import STAGES_FILE
    from hf_icot.training.config import schedule_from_config
    from hf_icot.training.trainer import ICoTTrainer

    if script_args.task is not None and script_args.task != TASK:
        raise ValueError(f"--task {script_args.task!r} is not this study's; semiautomata.py trains on --task {TASK}.")
    if model_args.scratch_model is None:
        raise ValueError("semiautomata.py trains models from scratch; give --scratch_model (GPT-2 fields).")
    with RecipeRun(training_args) as run:
        schedule = schedule_from_config(training_args)
        # Step 1: data, built on the fly (the automaton, T, the OOD laws come from --task_args) or loaded.
        data = run.load_data(script_args, build=build_dataset)

        # Step 2: the model at its depth and parameter budget (the count needs the vocabulary of the run's tokenizer).
        hints = longest_hint(schedule.layout, data.dataset["train"])
        vocab = len(build_word_level_tokenizer(data.dataset, max_hint_length=hints))
        model_args.scratch_model, sizing = size_model(model_args.scratch_model, vocab)
        model, tokenizer = load_model_for_run(model_args, schedule.layout, data.dataset)
        sizing = {**sizing, "n_layer": model.config.n_layer, "n_embd": model.config.n_embd}
        sizing["parameters"] = model.num_parameters()  # the built model's own count (equal to the helper's)
        # The probes' control: early steps have few distinct prefixes, which even an untrained model separates.
        probe_split = data.evaluation_sets.get("test", next(iter(data.evaluation_sets.values())))
        probes_at_init = state_probe_map(model, tokenizer, probe_split, seed=training_args.seed)

        # Step 3: train; every stage end measures generation accuracy on each evaluation split (implicit, explicit).
        trainer = run.track(ICoTTrainer(model=model, args=training_args, train_dataset=data.train,
                                        eval_dataset=data.evaluation_sets, processing_class=tokenizer,
                                        schedule=schedule))  # fmt: skip
        trainer.train(resume_from_checkpoint=run.resume_from)

        # Step 4: every split in implicit, explicit and the hint modes; Step 5: where the states are (linear probes).
        metrics = trainer.evaluate_generation(data.evaluation_sets, metric_key_prefix="")
        probes = state_probe_map(trainer.model, tokenizer, probe_split, seed=training_args.seed)
        probes["accuracy_at_init"] = probes_at_init["accuracy"]

        # Step 6: model, curves, card; the study's own records beside them.
        weights_kind = trainer.save_run()
        example = next(iter(data.evaluation_sets.values()))[0]
        trainer.create_model_card(metrics=metrics, dataset=data.info, example=example, weights_kind=weights_kind,
                                  license=script_args.card_license)  # fmt: skip
        run.write_records(
            {
                "model_size.json": sizing,
                STAGES_FILE: run.stages(trainer),
                "stage_metrics.json": {str(stage): values for stage, values in trainer.stage_metrics.items()},
                "probes.json": probes,
                "task_args.json": script_args.task_args or {},
                "schedule.json": trainer.schedule.to_dict(),
                # chance for an answer-only guesser: the most frequent final state of each split
                "splits.json": {name: majority_share(split["answer"]) for name, split in data.evaluation_sets.items()},
            }
        )
    return metrics


if __name__ == "__main__":
    run_main(main, parse_args)
