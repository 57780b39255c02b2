"""What an ICoT run leaves, as trainer methods (TRL puts ``create_model_card`` and ``push_to_hub`` on its trainers):
each stage's evaluation and model (``stage-<i>``), and at the end: generation on every split, the model, the card,
curves and ``eval_results.json``, the push.

:class:`RunOutputsMixin` is mixed into :class:`hf_icot.training.trainer.ICoTTrainer`; its methods are called on every
process of a multi-process run and decide themselves who does what:

* generation is evaluated by **every** process, each on its share of the examples (in lockstep under FSDP, whose
  forward needs every shard), and every process gets the same metrics — the same rule for the per-stage evaluation
  and the final one;
* under FSDP every process takes part in saving (the full state dict is gathered), otherwise the main process saves;
* the card, the curves, ``eval_results.json`` and the push are the main process's.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from hf_icot.publishing.run_files import EVAL_RESULTS_FILE, SCHEDULE_FILE

STAGE_CHECKPOINT_PREFIX = "stage-"
#: What a stage end logs beside ``cot/ended_stage``: the wall seconds of its evaluation and of its stage checkpoint.
STAGE_END_COSTS = ("cot/stage_evaluation_s", "cot/stage_checkpoint_s")


class RunOutputsMixin:
    """Per-stage evaluation and models, final evaluation, saving, model card and push for
    :class:`hf_icot.training.trainer.ICoTTrainer`."""

    def evaluate_generation(
        self,
        eval_dataset: Any = None,
        modes: Sequence[str] | None = None,
        metric_key_prefix: str = "eval",
    ) -> dict[str, float]:
        """Generation accuracy of this run's model: :func:`hf_icot.evaluation.generation_accuracy.evaluate_generation`
        with the run's layout, batch size, token cap and accelerator. Call it on every process (see the module).

        Args:
            eval_dataset: one split, or a mapping of split name -> examples (every split but ``train``); None: the
                trainer's evaluation set(s), the first ``args.generation_eval_examples`` of each.
            modes: the evaluation modes; None: implicit and explicit (led by reference in the reference sequence
                format) plus the ``hint=k`` modes of ``args.eval_modes``, the modes a run reports at its end.
            metric_key_prefix: put before every key with ``_``, as ``Trainer.evaluate`` does (``""``: none).

        Returns:
            ``f"{prefix}_{mode}/{metric}"`` for one split, ``f"{prefix}_{split}/{mode}/{metric}"`` for a mapping
            (without ``prefix_`` when the prefix is ``""``).

        Raises:
            ValueError: no ``eval_dataset`` and no evaluation set on the trainer, or what ``evaluate_generation``
                refuses.
        """
        from hf_icot.evaluation.generation_accuracy import evaluate_generation  # loads the metric: only when used

        if eval_dataset is None:
            eval_dataset = self._generation_eval_sets()
        if modes is None:
            hints = [mode for mode in self.args.eval_modes or [] if mode.startswith("hint=")]
            reference = ["reference"] if self.layout.is_reference else []  # the reference configs' headline
            modes = ["latent"] if self.layout.latent else [*reference, "implicit", "explicit", *hints]
        metrics = evaluate_generation(
            self.accelerator.unwrap_model(self.model),
            self.processing_class,
            eval_dataset,
            modes=list(modes),
            batch_size=self.args.per_device_eval_batch_size,
            max_new_tokens=self.args.max_new_tokens,
            layout=self.layout,
            accelerator=self.accelerator,
        )
        if not metric_key_prefix:
            return metrics
        return {f"{metric_key_prefix}_{key}": value for key, value in metrics.items()}

    def _generation_eval_sets(self) -> Any:
        """The trainer's evaluation set(s), the first ``args.generation_eval_examples`` of each."""
        if self.eval_dataset is None:
            raise ValueError("generation evaluation needs examples; pass eval_dataset or give the trainer one.")
        limit = self.args.generation_eval_examples

        def first(split: Any) -> Any:
            return split if limit is None else split.select(range(min(len(split), limit)))

        if isinstance(self.eval_dataset, dict):
            return {name: first(split) for name, split in self.eval_dataset.items()}
        return first(self.eval_dataset)

    def _end_stage(self, stage: int) -> None:
        """Save and evaluate the model at the end of curriculum stage ``stage``, and log what each cost
        (``cot/stage_evaluation_s``, ``cot/stage_checkpoint_s``: wall seconds, beside ``cot/ended_stage``)."""
        step = self.state.global_step - 1
        metrics: dict[str, float] = {"cot/stage": stage}
        started = time.perf_counter()
        if self.args.evaluate_each_stage and self.eval_dataset is not None:
            metrics.update(self.evaluate())
            if self.args.eval_modes:  # every process: one rule under DDP and FSDP alike
                generation = self.evaluate_generation(modes=self.args.eval_modes)
                metrics.update(generation)
                self.log({**generation, "cot/stage": stage})
        self.stage_metrics[stage] = metrics
        evaluated = time.perf_counter()
        if self.args.keep_stage_checkpoints:
            self._save_stage_checkpoint(stage, step, metrics)
        cost = dict(zip(STAGE_END_COSTS, (evaluated - started, time.perf_counter() - evaluated), strict=True))
        self.log({"cot/ended_stage": stage, **{name: round(value, 3) for name, value in cost.items()}})

    @property
    def stage_end_seconds(self) -> dict[str, float]:
        """What this run's stage ends have cost so far, summed from their log rows: ``cot/stage_evaluation_s`` and
        ``cot/stage_checkpoint_s`` (0 for each before the first)."""
        ends = [entry for entry in self.state.log_history if "cot/ended_stage" in entry]
        return {name: sum(entry[name] for entry in ends) for name in STAGE_END_COSTS}

    def _save_stage_checkpoint(self, stage: int, step: int, metrics: dict[str, float]) -> None:
        final = os.path.join(self.args.output_dir, f"{STAGE_CHECKPOINT_PREFIX}{stage}")
        staging = os.path.join(self.args.output_dir, f".{STAGE_CHECKPOINT_PREFIX}{stage}.tmp")
        if self.args.should_save and os.path.isdir(staging):
            shutil.rmtree(staging)
        self.accelerator.wait_for_everyone()
        self.save_model(staging)
        if self.args.should_save:
            record = {
                "stage": stage,
                "last_step": step,
                "removes": self.schedule.describe_stage(step),
                "schedule": self.schedule.to_dict(),
                "method": self.method.to_dict(),
                "metrics": {key: value for key, value in metrics.items() if isinstance(value, (int, float))},
            }
            with open(os.path.join(staging, SCHEDULE_FILE), "w", encoding="utf-8") as stream:
                json.dump(record, stream, indent=2, sort_keys=True, default=str)
            if os.path.isdir(final):
                shutil.rmtree(final)
            os.replace(staging, final)
        self.accelerator.wait_for_everyone()

    def add_best_epoch_selection(self, evaluation_sets: Mapping[str, Any]) -> Any:
        """Select the best epoch by validation generation accuracy (``args.selection_mode``; the reference's rule):
        adds and returns a :class:`hf_icot.training.selection.BestEpochCallback`.

        Raises:
            ValueError: ``evaluation_sets`` without a validation split.
        """
        from hf_icot.training.selection import BestEpochCallback

        if "validation" not in evaluation_sets:
            raise ValueError("--select_best_epoch needs a validation split; add one or pass it with --eval_files.")
        callback = BestEpochCallback(
            self, evaluation_sets["validation"], evaluation_sets.get("test"), self.args.selection_mode
        )
        self.add_callback(callback)
        return callback

    def weights_kind(self, merge_adapter: bool = False) -> str:
        """What :meth:`save_run` writes: ``"full"``, ``"merged"`` (LoRA merged in) or ``"adapter"`` (LoRA alone)."""
        from peft import PeftModel

        if not isinstance(self.accelerator.unwrap_model(self.model), PeftModel):
            return "full"
        return "merged" if merge_adapter else "adapter"

    def save_run(self, merge_adapter: bool = False, base_model_id: str | None = None) -> str:
        """Save the trained model (safetensors) and tokenizer into ``args.output_dir``; returns :meth:`weights_kind`.

        Args:
            merge_adapter: merge a LoRA adapter into the weights and save a plain model (not under FSDP).
            base_model_id: the Hub id an adapter saved alone names as its base.

        Raises:
            ValueError: ``merge_adapter`` under FSDP (save the adapter, then merge it in one process).
        """
        from hf_icot.publishing import saving

        kind = self.weights_kind(merge_adapter)
        if self.is_fsdp_enabled:
            if merge_adapter:
                raise ValueError(
                    "--merge_adapter is not supported under FSDP; save the adapter, then merge it in one process."
                )
            # Written aside and moved in, as saving.save_model does: a kill mid-write leaves no truncated weights.
            staging = Path(self.args.output_dir) / f"{saving.SAVING_PREFIX}fsdp"
            if self.args.should_save and staging.is_dir():
                shutil.rmtree(staging)
            self.accelerator.wait_for_everyone()
            self.save_model(str(staging))  # gathers the full state dict (or the adapter's) from the shards
            self.accelerator.wait_for_everyone()
            if self.args.should_save:
                saving.move_into(staging, Path(self.args.output_dir))
                shutil.rmtree(staging)
        elif self.is_world_process_zero():
            saving.save_model(
                self.accelerator.unwrap_model(self.model),
                self.processing_class,
                self.args.output_dir,
                merge_adapter=merge_adapter,
                base_model_id=base_model_id,
            )
            self.method.save_files(self.model, self.args.output_dir)  # e.g. CODI's projection, beside the model
        self.accelerator.wait_for_everyone()
        return kind

    def create_model_card(
        self,
        *,
        metrics: Mapping[str, float],
        dataset: Mapping[str, Any],
        example: Mapping[str, Any],
        weights_kind: str = "full",
        base_model: str | None = None,
        license: str | None = None,
        selection: Mapping[str, Any] | None = None,
    ) -> Path | None:
        """Write the loss curves, the model card and ``eval_results.json`` into ``args.output_dir`` (main process;
        returns the card's path, None elsewhere).

        Args:
            metrics: ``evaluate_generation(splits, metric_key_prefix="")``'s output (the card's results and
                model-index; speeds kept only where answers are right,
                :func:`hf_icot.evaluation.generation_accuracy.reportable_metrics`).
            dataset: what the card says about the data (``source``, ``config``, ``task``, ``fingerprint``, and
                ``splits``: rows per split).
            example: an evaluation example for the card's how-to-use snippet, which asks it as evaluation does.
            weights_kind: what :meth:`save_run` returned.
            base_model: the model fine-tuned (a Hub id for a link), None when trained from scratch.
            license: an SPDX-style license id.
            selection: best-epoch selection's table (:meth:`hf_icot.training.selection.BestEpochCallback.summary`).
        """
        from hf_icot.evaluation.generation_accuracy import reportable_metrics
        from hf_icot.evaluation.prompts import plan_generation
        from hf_icot.publishing.model_card import describe_run, save_training_curves, write_model_card
        from hf_icot.publishing.saving import write_text_atomic

        if not self.is_world_process_zero():
            return None
        output_dir, args = self.args.output_dir, self.args
        metrics = reportable_metrics(metrics)  # no speed for a mode whose answers are wrong
        run = describe_run(self)
        save_training_curves(self.state.log_history, [s["start_step"] for s in run["schedule"]["stages"]], output_dir)
        layout = self.layout
        asked = plan_generation(example, self.processing_class, "latent" if layout.latent else "implicit", layout)
        path = write_model_card(
            output_dir,
            title=os.path.basename(os.path.normpath(args.hub_model_id or output_dir)),
            model_ref=args.hub_model_id or output_dir,
            base_model=base_model,
            weights_kind=weights_kind,
            dataset=dataset,
            metrics=metrics,
            example={
                "question": example["question"],
                "answer": example["answer"],
                "max_new_tokens": asked.gold_length + 7,
                # keep_position models expect the answer where the full CoT would have ended
                "position_shift": asked.position_shift[1] if asked.position_shift else 0,
                # latent models are asked with their latent slots (the snippet calls hf_icot's latent generation)
                "latent_slots": layout.latent_slots(len(example["cot"])) if layout.latent else None,
                "latent_format": layout.latent_format,
                "remove_eos": layout.remove_eos,
                "latent_iterations": layout.latent_iterations,  # PCCoT: the slots by Jacobi iteration
                "eos_token": self.processing_class.eos_token,
            },
            license=license,
            selection=selection,
            inference_setting=f"{args.device.type}, batch size {args.per_device_eval_batch_size}",
            **run,
        )
        write_text_atomic(
            Path(output_dir) / EVAL_RESULTS_FILE, json.dumps(dict(metrics), indent=2, sort_keys=True) + "\n"
        )
        return path

    def push_to_hub(
        self,
        commit_message: str | None = None,
        blocking: bool = True,
        token: str | None = None,
        revision: str | None = None,
        **kwargs: Any,
    ) -> str | None:
        """Upload the finished run folder (model or adapter, tokenizer, card, curves) to ``args.hub_model_id`` in
        one commit (main process; returns the commit URL). Unlike ``Trainer.push_to_hub`` nothing is saved first:
        call :meth:`save_run` and :meth:`create_model_card` before, so that a failed push can be retried with
        ``python -m hf_icot.publishing.hub push``.

        Raises:
            hf_icot.publishing.hub.PushError: the upload failed; the message gives the retry command.
        """
        from hf_icot.publishing.hub import push_output_dir

        if not self.is_world_process_zero():
            return None
        return push_output_dir(
            self.args.output_dir,
            self.args.hub_model_id,
            private=bool(self.args.hub_private_repo),
            revision=revision or self.args.hub_revision,
            token=token or self.args.hub_token,
        )


def check_push_possible(hub_model_id: str | None, token: str | None, adapter_base: str | None = None) -> None:
    """Fail before training, not after, when the final push cannot work.

    Args:
        hub_model_id: the model repo to push to.
        token: a token given explicitly (else ``HF_TOKEN`` or the saved login).
        adapter_base: for a LoRA adapter saved alone, the base model it will name.

    Raises:
        ValueError: no repo id, offline mode, no token, or an adapter that would name a local base model.
    """
    from huggingface_hub import constants, get_token

    from hf_icot.publishing.hub import is_hub_id

    if not hub_model_id:
        raise ValueError("--push_to_hub needs --hub_model_id USER/NAME, the model repo to push to.")
    if constants.is_offline_mode():
        raise ValueError("--push_to_hub is set but HF_HUB_OFFLINE is set, so the Hub is unreachable; unset one.")
    if not (token or get_token()):
        raise ValueError("--push_to_hub needs a Hugging Face token: run `hf auth login` or set HF_TOKEN.")
    if adapter_base is not None and not is_hub_id(adapter_base):
        raise ValueError(
            f"the adapter would name the local base model {adapter_base!r}, which others cannot load; "
            "pass --base_model_hub_id with its Hub id, or --merge_adapter."
        )
