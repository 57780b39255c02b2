"""ICoTTrainer: the Hugging Face Trainer with a CoT-removal curriculum.

What it adds to :class:`transformers.Trainer` (same constructor, plus an optional ``schedule``):

* **Truncation at the exact step.** Batches are collated untruncated (:class:`hf_icot.data.collator.ICoTCollator`) and
  rendered in :meth:`ICoTTrainer.get_batch_samples`, which the training loop calls once per optimizer step with
  ``state.global_step`` equal to the step about to be computed; the schedule picks each example's truncation there.
* **One loss, in order** (:meth:`ICoTTrainer.compute_loss`): the method's own loss where it has one; else the forward
  under the dropout lever where it is on, the causal-LM loss at the labelled positions (or ``Trainer``'s own), and the
  adaptive pace's answer hits from that step's logits. The levers and the pace are helpers it calls, not overrides.
* **Adaptive pace** (:mod:`hf_icot.curriculum.adaptive`, :mod:`hf_icot.training.adaptive_pace`): for a schedule that
  reads the model, the training accuracy of every step, from the step's own logits and summed over processes, is
  handed to the schedule before checkpoints, and logged as ``cot/answer_accuracy`` (``adaptive_metric: answer``) or
  ``cot/sequence_accuracy`` (``sequence``).
* **Logits only where a label is** (``labelled_logits_only``, :mod:`hf_icot.levers.labelled_loss`): the output
  layer and the loss run at the positions whose next token is labelled, the same loss as the full computation.
* **GPT-2's GELU in one kernel** (``fused_gelu``, :mod:`hf_icot.levers.fused_gelu`): the Python tanh GELU
  becomes torch's fused one, the same function to float rounding; and a right-padded batch no label reads loses its
  attention mask (:mod:`hf_icot.levers.causal_mask`) so SDPA takes its causal path.
* **Dropout's masks drawn ahead** (``draw_dropout_ahead``, off unless asked for; :mod:`hf_icot.levers.dropout_ahead`):
  on the CPU a helper thread draws each training forward's dropout masks while it runs, the same numbers in torch's
  order; a run that asks for it logs one line saying so (it does nothing on a GPU).
* **Optimizer resets** when the schedule asks (stepwise ``reset_optimizer``, Coconut's ``reset_optimizer_every``): the
  Adam moments and step counts are cleared, skipped once the previous step kept no CoT token where the schedule says
  so (``skips_reset_without_cot``); the learning-rate schedule keeps following the global step.
* **Stage bookkeeping**: ``cot/stage``, ``cot/removed_tokens`` (the schedule's nominal count, ``inf`` once all goes)
  ``cot/kept_tokens_mean`` (measured on this process's batches) and ``cot/forward_passes`` (decoder passes per
  training example, :mod:`hf_icot.training.decoder_passes`) join the training logs; when a stage ends its
  model is saved to ``output_dir/stage-<i>`` and evaluated (loss, and generation exact match if ``eval_modes``);
  what each stage end cost is logged (``cot/stage_evaluation_s``, ``cot/stage_checkpoint_s``) and summed at the end.
* **Exact resume** (:mod:`hf_icot.training.curriculum_state`): the schedule, the method's options, the run-time
  flags, the seed and the batch size ride in ``trainer_state.json``, and every draw is a pure function of (seed, step,
  example id), so a resumed run — on any number of processes — continues the same curriculum; one with another
  schedule, method option, seed or batch size is refused.
* **The method** (:mod:`hf_icot.methods`): the schedule's method object renders each batch, may give the model a
  forward and a loss of its own (Coconut, CODI) and writes its own files beside every saved model; the trainer calls
  its hooks and knows no method by name.
* **Kill-safe checkpoints**: a checkpoint is written under a marker removed once every process has written its part
  (older checkpoints are rotated out only then), and ``resume_from_checkpoint=True`` takes the last complete one
  (:mod:`hf_icot.runs.run_folder`).
* **The end of a run** (:mod:`hf_icot.training.outputs`): ``evaluate_generation``, ``save_run``, ``create_model_card``,
  ``push_to_hub``.
* **What clusters do to runs** (:class:`~hf_icot.runs.checkpoints.SafeRunMixin`): a preemption signal saves a
  checkpoint and stops; a non-finite loss stops before the optimizer step (the last saved checkpoint stays the last
  good one); a checkpoint that fills the disk is removed.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
from typing import Any

import datasets
import torch
from transformers import Trainer, TrainerCallback
from transformers.trainer_utils import has_length

from hf_icot.curriculum import Schedule
from hf_icot.curriculum.layout import SequenceLayout
from hf_icot.data.collator import ICoTCollator
from hf_icot.errors import NonFiniteLossError  # noqa: F401  (raised by SafeRunMixin.training_step; its old home)
from hf_icot.levers.causal_mask import without_needless_mask
from hf_icot.levers.dropout_ahead import DropoutDrawsAhead, dropout_draws_ahead_for, forward_drawing_ahead
from hf_icot.levers.fused_gelu import fuse_tanh_gelu
from hf_icot.levers.labelled_loss import LabelledLoss
from hf_icot.modeling.sizing import context_length
from hf_icot.runs.checkpoints import SafeRunMixin
from hf_icot.training.adaptive_pace import ANSWER_MASK_KEY, AnswerPace
from hf_icot.training.config import ICoTConfig, method_from_config, schedule_from_config
from hf_icot.training.curriculum_state import ICoTStateCallback
from hf_icot.training.decoder_passes import DecoderPasses
from hf_icot.training.generation_eval import GenerationEvalCallback
from hf_icot.training.outputs import SCHEDULE_FILE, RunOutputsMixin
from hf_icot.training.prepared_data import cot_extent, inserted_tokens, prepare_splits

logger = logging.getLogger(__name__)

#: Marks a rendered batch that ``max_len_train`` skips (popped before the model sees the batch).
SKIP_KEY = "icot_skip"


class ICoTTrainer(RunOutputsMixin, SafeRunMixin, Trainer):
    """A :class:`transformers.Trainer` that trains with a CoT-removal curriculum.

    Args:
        model, data_collator, train_dataset, eval_dataset, processing_class, …: as for ``Trainer``. The datasets
            follow the shared schema (``question``, ``cot``, ``answer``, optional ``cot_level``); they are prepared
            with :meth:`ICoTCollator.prepare_dataset` (tokenized once, ``example_id`` added, lengths checked).
            ``processing_class`` (the tokenizer) is required; ``data_collator`` defaults to an ``ICoTCollator``.
        args: an :class:`hf_icot.training.config.ICoTConfig`.
        schedule: a :class:`hf_icot.curriculum.Schedule` overriding the one ``args`` describes.

    After training, ``trainer.schedule.describe(trainer.state.max_steps)`` lists the stages (for a model card),
    ``trainer.stage_metrics`` holds each stage's evaluation, and ``output_dir/stage-<i>`` each stage's last model
    (with ``icot_schedule.json``: stage, last step, what it removes, metrics). Example::

        tokenizer = build_word_level_tokenizer(dataset)  # or prepare_tokenizer_for_icot(gpt2_tokenizer, model)
        args = ICoTConfig(output_dir="out", schedule="stepwise", remove_per_epoch=8, eval_modes=["implicit"])
        trainer = ICoTTrainer(model=model, args=args, train_dataset=dataset["train"],
                              eval_dataset=dataset["validation"], processing_class=tokenizer)
        trainer.train()
        metrics = trainer.evaluate_generation({"test": dataset["test"]}, metric_key_prefix="")  # then save_run, ...

    Raises:
        ValueError: ``args`` not an ``ICoTConfig``, no tokenizer, a collator that is not an ``ICoTCollator``, a
            dataset :meth:`ICoTCollator.prepare_dataset` rejects, or a tokenizer lacking a token the curriculum
            inserts (placeholder, length hints).
    """

    #: The dropout lever (``draw_dropout_ahead``; :mod:`hf_icot.levers.dropout_ahead`), None where it is off.
    dropout_ahead: DropoutDrawsAhead | None = None

    def __init__(
        self,
        model: Any = None,
        args: ICoTConfig | None = None,
        data_collator: ICoTCollator | None = None,
        train_dataset: Any = None,
        eval_dataset: Any = None,
        processing_class: Any = None,
        model_init: Any = None,
        compute_loss_func: Any = None,
        compute_metrics: Any = None,
        callbacks: list[TrainerCallback] | None = None,
        optimizers: tuple[Any, Any] = (None, None),
        optimizer_cls_and_kwargs: Any = None,
        preprocess_logits_for_metrics: Any = None,
        schedule: Schedule | None = None,
    ) -> None:
        args = args if args is not None else ICoTConfig(output_dir="trainer_output")
        if not isinstance(args, ICoTConfig):
            raise ValueError(f"ICoTTrainer needs an ICoTConfig as args, got {type(args).__name__}.")
        if processing_class is None:
            raise ValueError("ICoTTrainer needs the tokenizer as processing_class to encode questions and CoTs.")
        self.schedule = schedule if schedule is not None else schedule_from_config(args)
        self.method = method_from_config(args, self.schedule)  # what the schedule's method adds: hooks below
        layout = self.schedule.layout
        data_collator = data_collator if data_collator is not None else ICoTCollator(processing_class, layout)
        if not isinstance(data_collator, ICoTCollator):
            raise ValueError(
                f"ICoTTrainer needs an ICoTCollator as data_collator, got {type(data_collator).__name__}."
            )
        with args.main_process_first(desc="hf_icot dataset preparation"):
            # The collator's ids, then the method's own columns (CODI's teacher CoT in its format), each once.
            train_dataset, eval_dataset, self.skipped_too_long = prepare_splits(
                data_collator, train_dataset, eval_dataset, context_length(model), args.too_long, layout,
                self.method, processing_class,
            )  # fmt: skip
        if train_dataset is not None:
            data_collator.require_tokens(inserted_tokens(train_dataset, layout))
        # The extent of the training data's CoTs: schedules end their curriculum where the longest CoT is gone.
        self._max_cot_level, self._max_cot_tokens, self._max_cot_steps = cot_extent(train_dataset)

        self._previous_step_without_cot = self._step_without_cot = False
        self._optimizer_resets = 0
        self._kept_tokens = 0.0
        self._rendered_examples = 0
        self._last_step = 0
        self.stage_metrics: dict[int, dict[str, float]] = {}
        # The helpers compute_loss calls, beside the method's own loss: the speed levers and the adaptive pace.
        self.labelled_loss = LabelledLoss(self)
        self.answer_pace = AnswerPace(self.schedule, processing_class)
        if args.fused_gelu and isinstance(model, torch.nn.Module):
            fuse_tanh_gelu(model)  # no weights change: before or after wrapping alike
        self.decoder_passes = DecoderPasses()  # logged as cot/forward_passes
        if model is not None:  # before the Trainer wraps the model and builds the optimizer
            self.method.prepare_model(model, processing_class, args.seed, self._max_cot_steps)
            self.decoder_passes.watch([model, *self.method.training_only_modules(model)])
        callbacks = [ICoTStateCallback(self), *(callbacks or [])]
        super().__init__(
            model=model,
            args=args,
            data_collator=data_collator,
            train_dataset=train_dataset,
            eval_dataset=eval_dataset,
            processing_class=processing_class,
            model_init=model_init,
            compute_loss_func=compute_loss_func,
            compute_metrics=compute_metrics,
            callbacks=callbacks,
            optimizers=optimizers,
            optimizer_cls_and_kwargs=optimizer_cls_and_kwargs,
            preprocess_logits_for_metrics=preprocess_logits_for_metrics,
        )
        if args.max_len_train is not None and self.accelerator.num_processes > 1:
            # Processes skip different batches, but DDP and FSDP reduce gradients in one backward over all of them.
            raise ValueError(
                f"max_len_train skips batches on one process at a time, which {self.accelerator.num_processes} "
                "processes reducing gradients together cannot do; run on one process or unset max_len_train."
            )
        self.generation_eval = None
        if args.generation_eval_steps is not None:
            self.generation_eval = GenerationEvalCallback(
                self,
                args.generation_eval_steps,
                args.eval_modes,
                args.generation_eval_examples,
                stop_at=args.stop_at_implicit_em,
                split=args.generation_eval_split,
            )
            self.add_callback(self.generation_eval)
        if self.method.latent:
            self.loss_is_scaled_for_ga = False  # the latent losses are micro-batch means, as the methods' own code
        self.dropout_ahead = dropout_draws_ahead_for(args, self.model, self.method.latent)
        self._register_safeguards()

    # -- curriculum ------------------------------------------------------------------------------------------------

    def _bind_schedule(self, dataloader: Any) -> None:
        # Without a dataloader length the Trainer reports max_steps as the epoch size, which means nothing here.
        steps_per_epoch = None
        if has_length(dataloader):
            accumulation = self.args.gradient_accumulation_steps
            steps_per_epoch = max(1, len(dataloader) // accumulation + int(len(dataloader) % accumulation > 0))
        self.schedule.bind(steps_per_epoch, self._max_cot_level, self._max_cot_tokens, self._max_cot_steps)

    def set_initial_training_values(self, args, dataloader):
        values = super().set_initial_training_values(args, dataloader)
        self._bind_schedule(dataloader)
        self.method.check_fits(self.train_dataset, context_length(self.model))  # before the first step
        return values

    def _remove_unused_columns(self, dataset: Any, description: str | None = None) -> Any:
        # The training loader fetches millions of rows: leave out the texts rendering does not read.
        dataset = super()._remove_unused_columns(dataset, description)
        if description == "Training" and isinstance(dataset, datasets.Dataset):
            return self.data_collator.rendering_view(dataset)
        return dataset

    def _render(self, inputs: dict[str, Any], step: int, training: bool) -> tuple[dict[str, Any], list[int]]:
        examples = inputs["pending"].examples
        batch, kept = self.method.render(examples, step, training, self.data_collator)
        if training and self.schedule.needs_answer_accuracy:
            self.answer_pace.mark(batch, examples)
        return batch, kept

    def get_batch_samples(self, epoch_iterator, num_batches, device):
        """Fetch the micro-batches of one optimizer step and truncate them for step ``state.global_step``; first close
        the stage that ended with the previous step, and reset the optimizer if the schedule says so."""
        step = self.state.global_step
        if step > 0 and self.schedule.stage(step) != self.schedule.stage(step - 1):
            # Here, rather than in on_step_end, so the Trainer's own log/save/evaluate of the last step is done.
            self._end_stage(self.schedule.stage(step - 1))
        pending, _ = super().get_batch_samples(epoch_iterator, num_batches, device)
        skip = self.schedule.skips_reset_without_cot and self._previous_step_without_cot
        if self.schedule.resets_optimizer_at(step) and not skip:
            self.reset_optimizer_state()
        batches, without_cot = [], True
        for inputs in pending:
            batch, kept_per_example = self._render(inputs, step, training=True)
            self._mark_long_batch(batch)
            batches.append(batch)
            kept = sum(kept_per_example)
            without_cot = without_cot and kept == 0
            self._kept_tokens += kept
            self._rendered_examples += len(kept_per_example)
        if self.schedule.resets_optimizer_at(step + 1):
            # Whether the next reset is skipped must agree on every rank, whose batches differ.
            flag = torch.tensor([int(without_cot)], device=self.args.device)
            self._previous_step_without_cot = bool(self.accelerator.gather(flag).min().item())
        self._last_step, self._step_without_cot = step, without_cot
        return batches, self._get_num_items_in_batch(batches, device)

    def reset_optimizer_state(self) -> None:
        """Forget the optimizer's moments and step counts, as a freshly built AdamW would have them."""
        optimizer = getattr(self.optimizer, "optimizer", self.optimizer)
        optimizer.state.clear()
        self._optimizer_resets += 1
        logger.info(
            "step %d: optimizer state reset (stage %d)",
            self.state.global_step,
            self.schedule.stage(self.state.global_step),
        )

    @property
    def optimizer_resets(self) -> int:
        """How many times the optimizer state was reset in this run (resumed runs included)."""
        return self._optimizer_resets

    # -- training step ---------------------------------------------------------------------------------------------

    def _mark_long_batch(self, batch: dict[str, Any]) -> None:
        """Flag a batch longer than ``args.max_len_train`` after removal (the reference skips it)."""
        limit = self.args.max_len_train
        if limit is not None and batch["input_ids"].shape[1] > limit:
            batch[SKIP_KEY] = True
            self.skipped_long_batches = getattr(self, "skipped_long_batches", 0) + 1

    def call_model_init(self, trial=None):
        model = super().call_model_init(trial)
        if self.dropout_ahead is not None:
            self.dropout_ahead.model_built(model)  # inside train(): eager attention, and the lever starts afresh
        if self.args.fused_gelu:
            fuse_tanh_gelu(model)
        self.decoder_passes.watch([model, *self.method.training_only_modules(model)])
        return model

    def training_step(self, model, inputs, num_items_in_batch=None):
        if inputs.pop(SKIP_KEY, False):
            # No forward or backward: parameters without a gradient are left alone by the optimizer step.
            return torch.zeros((), device=self.args.device)
        if not self.method.latent:  # a latent forward reads the mask itself
            # Right padding that no label reads: without its mask SDPA takes its causal kernel (same loss).
            inputs = without_needless_mask(model, inputs)
        with self.decoder_passes.step():
            return super().training_step(model, inputs, num_items_in_batch)  # a non-finite loss stops (SafeRunMixin)

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        """A micro-batch's loss; the one place it is computed, its steps in order:

        1. the method's own loss where it has one (Coconut, CODI: a forward that feeds hidden states back), and
           nothing below;
        2. else the forward under the dropout lever where it is on (``draw_dropout_ahead``,
           :func:`~hf_icot.levers.dropout_ahead.forward_drawing_ahead`), computing
        3. the causal-LM loss at the labelled positions only (``labelled_logits_only``; in row chunks where the logits
           are large, ``chunked_loss``: :class:`~hf_icot.levers.labelled_loss.LabelledLoss`), or else
           ``Trainer.compute_loss``'s own;
        4. the adaptive pace's answer hits, counted from that step's logits
           (:class:`~hf_icot.training.adaptive_pace.AnswerPace`), for a schedule that reads the model.
        """
        own = self.method.compute_loss(model, inputs)
        if own is not None:
            return (own["loss"], own) if return_outputs else own["loss"]
        scored = inputs.pop(ANSWER_MASK_KEY, None)  # the tokens the adaptive pace scores: it needs the logits
        keep_outputs = return_outputs or scored is not None
        with forward_drawing_ahead(self.dropout_ahead, model, inputs):
            computed = self.labelled_loss.compute(model, inputs, keep_outputs, num_items_in_batch)
            if computed is None:
                computed = super().compute_loss(model, inputs, True, num_items_in_batch)
        loss, outputs = computed
        if scored is not None:
            self.answer_pace.count(outputs, inputs["input_ids"], scored)
        return (loss, outputs) if return_outputs else loss

    @property
    def labelled_logits_strategy(self) -> str | None:
        """How the loss at the labelled positions splits the model (:class:`~hf_icot.levers.labelled_loss.
        LabelledLoss`): ``"logits_to_keep"``, ``"output_layer"``, None for the full computation, ``"undecided"``."""
        return self.labelled_loss.strategy

    @property
    def chunked_loss_exact(self) -> bool | None:
        """Whether the chunked loss is exact for this model (None: not checked yet)."""
        return self.labelled_loss.chunked_loss_exact

    @property
    def last_answer_accuracy(self) -> float | None:
        """The adaptive pace's accuracy of the last step observed (None before the first, or without one)."""
        return self.answer_pace.last_accuracy

    def _step_description(self, step: int) -> str:
        return f" (stage {self.schedule.stage(step)}, {self.schedule.describe_stage(step)} removed)"

    def log(self, logs: dict[str, float], start_time: float | None = None) -> None:
        if "loss" in logs and self.state.global_step > 0:
            step = self._last_step
            logs["cot/stage"] = self.schedule.stage(step)
            logs["cot/removed_tokens"] = self.schedule.removed_count(step)
            if self._rendered_examples:
                logs["cot/kept_tokens_mean"] = self._kept_tokens / self._rendered_examples
            self._kept_tokens, self._rendered_examples = 0.0, 0
            passes = self.decoder_passes.mean()
            if passes is not None:
                logs["cot/forward_passes"] = passes
            if self._optimizer_resets:
                logs["cot/optimizer_resets"] = self._optimizer_resets
            if self.last_answer_accuracy is not None:
                logs[f"cot/{self.schedule.metric}_accuracy"] = self.last_answer_accuracy
            if self.skipped_too_long:
                logs["cot/skipped_too_long"] = self.skipped_too_long
            logs.update(self.method.logs())
            if getattr(self, "skipped_long_batches", 0):
                logs["cot/skipped_long_batches"] = self.skipped_long_batches
        super().log(logs, start_time)

    # -- evaluation ------------------------------------------------------------------------------------------------

    def prediction_step(self, model, inputs, prediction_loss_only, ignore_keys=None):
        if "pending" in inputs:
            if self.schedule.steps_per_epoch is None and self.train_dataset is not None:
                self._bind_schedule(self.get_train_dataloader())  # evaluate() before train()
            # Evaluation sees the curriculum of the last trained step, without its random parts.
            inputs, _ = self._render(inputs, max(self.state.global_step - 1, 0), training=False)
        return super().prediction_step(model, inputs, prediction_loss_only, ignore_keys)

    @property
    def layout(self) -> SequenceLayout:
        """How this run's sequences are laid out after its last trained step (the schedule's): what generation must
        reproduce."""
        return self.schedule.layout_at(max(self.state.global_step - 1, 0))

    def train(self, resume_from_checkpoint: str | bool | None = None, trial: Any = None, **kwargs: Any):
        """``Trainer.train``, then the end of the last stage (saved and evaluated like the others).

        ``resume_from_checkpoint``: a checkpoint folder, or True for the last complete one in ``args.output_dir``
        (:meth:`~hf_icot.runs.checkpoints.SafeRunMixin.resolve_resume`).

        Raises:
            ValueError: an incomplete checkpoint, True with no complete checkpoint, or a checkpoint written with
                another schedule, seed or batch size.
        """
        if not resume_from_checkpoint:  # a resumed run restores these from the checkpoint instead
            self._previous_step_without_cot, self._optimizer_resets = False, 0
            self.schedule.load_state_dict({})
        lever = self.dropout_ahead
        with lever.while_training(self.model) if lever is not None else contextlib.nullcontext():
            output = super().train(resume_from_checkpoint=resume_from_checkpoint, trial=trial, **kwargs)
            if self.state.global_step > 0:
                self._end_stage(self.schedule.stage(self.state.global_step - 1))
        costs = self.stage_end_seconds
        if sum(costs.values()) >= 0.05:  # a run whose stage ends do nothing says nothing
            logger.info(
                "stage ends took %.1f s of evaluation and %.1f s of stage checkpoints (the training loop: %.1f s)",
                costs["cot/stage_evaluation_s"],
                costs["cot/stage_checkpoint_s"],
                output.metrics.get("train_runtime", float("nan")),
            )
        return output

    def _save(self, output_dir: str | None = None, state_dict: Any = None) -> None:
        super()._save(output_dir, state_dict)
        if output_dir is not None and self.args.should_save:
            with open(os.path.join(output_dir, SCHEDULE_FILE), "w", encoding="utf-8") as stream:
                json.dump(
                    {"schedule": self.schedule.to_dict(), "method": self.method.to_dict()},
                    stream,
                    indent=2,
                    sort_keys=True,
                )
            self.method.save_files(self.model, output_dir)

    def _load_from_checkpoint(self, resume_from_checkpoint: str, model: Any = None) -> None:
        super()._load_from_checkpoint(resume_from_checkpoint, model)
        self.method.load_files(self.model, resume_from_checkpoint)
