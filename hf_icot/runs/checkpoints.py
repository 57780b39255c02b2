"""What any ``Trainer`` of a recipe needs to survive being killed: checkpoints written under a marker, resume from the
last complete one, and a process group torn down before exit.

:class:`SafeRunMixin` goes in front of ``transformers.Trainer`` (:class:`hf_icot.training.trainer.ICoTTrainer` mixes it
in; :class:`CheckpointedTrainer` is the plain ``Trainer`` with it, for recipes without a curriculum):

* a checkpoint is written under :data:`~hf_icot.runs.run_folder.CHECKPOINT_WRITING`, removed once every process
  has written its part; older checkpoints are rotated out only then;
* ``train(resume_from_checkpoint=True)`` takes the last *complete* checkpoint (transformers' own lookup would take
  the last one even if a killed run left it half-written) and refuses an incomplete one in one sentence;
* :meth:`SafeRunMixin.end_processes` tears the process group down while the interpreter is alive (also at exit, when a
  script forgets);
* a preemption signal saves a checkpoint at the end of the step and stops with :class:`~hf_icot.errors.RunPreempted`
  (:mod:`hf_icot.runs.preemption`); in a recipe's run, also after the last step: the trained weights are kept as a
  checkpoint until the run ends, and a resumed run that finds every step done skips training;
* a non-finite loss stops training before the optimizer step with :class:`~hf_icot.errors.NonFiniteLossError`;
* a checkpoint that runs out of disk space is removed, and the run stops with :class:`~hf_icot.errors.DiskFullError`.
"""

from __future__ import annotations

import atexit
import gc
import json
import logging
import os
import shutil
import weakref
from typing import Any

import torch
from transformers import Trainer
from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR, rotate_checkpoints

from hf_icot.errors import DiskFullError, NonFiniteLossError, RunPreempted
from hf_icot.publishing.disk_space import disk_full_error, folder_bytes, is_disk_full
from hf_icot.runs.preemption import DEFAULT_SIGNALS, PreemptionCallback, parse_signals
from hf_icot.runs.run_folder import CHECKPOINT_WRITING, TRAINER_STATE, checkpoint_problem, last_complete_checkpoint

logger = logging.getLogger(__name__)


def _has_optimizer_state(checkpoint: str) -> bool:
    return any(name.startswith("optimizer") for name in os.listdir(checkpoint))


def _end_processes_at_exit(trainer: weakref.ref) -> None:
    alive = trainer()
    if alive is not None:
        alive.end_processes(wait=False)  # other processes may already be gone: no barrier


class SafeRunMixin:
    """Kill-safe checkpoints, resume from the last complete one, process teardown (see the module docstring)."""

    def _register_safeguards(self) -> None:
        """Call once the ``Trainer`` is built: preemption signals are caught while training (``args.
        preemption_signals``, SIGTERM for arguments without the field), and a script that forgets
        :meth:`end_processes` still tears the group down before interpreter shutdown."""
        self.preemption = PreemptionCallback(parse_signals(getattr(self.args, "preemption_signals", DEFAULT_SIGNALS)))
        self.final_checkpoint: str | None = None  # what _save_final_checkpoint added, removed when the run ends
        self.add_callback(self.preemption)
        if torch.distributed.is_available() and torch.distributed.is_initialized():
            atexit.register(_end_processes_at_exit, weakref.ref(self))

    def get_decay_parameter_names(self, model) -> list[str]:
        """Every parameter under ``args.decay_all_parameters`` (the reference's and the marginals study's AdamW decay
        biases and LayerNorm weights too); otherwise the ``Trainer``'s choice, which leaves them out."""
        if getattr(self.args, "decay_all_parameters", False):
            return [name for name, _ in model.named_parameters()]
        return super().get_decay_parameter_names(model)

    def _last_checkpoint(self) -> str | None:
        return last_complete_checkpoint(self.args.output_dir) if self.args.output_dir else None

    def resolve_resume(self, resume_from_checkpoint: str | bool | None) -> str | None:
        """The checkpoint folder to resume from (True: the last complete one in ``args.output_dir``), checked.

        Raises:
            ValueError: True with no complete checkpoint, or a checkpoint that is incomplete.
        """
        if resume_from_checkpoint is True:
            resume_from_checkpoint = self._last_checkpoint()
            if resume_from_checkpoint is None:
                raise ValueError(f"no complete checkpoint-<step> folder in {self.args.output_dir!r} to resume from.")
        if not resume_from_checkpoint:
            return None
        problem = checkpoint_problem(resume_from_checkpoint)
        if problem is not None:
            raise ValueError(f"cannot resume from {str(resume_from_checkpoint)!r}: {problem}.")
        with open(os.path.join(resume_from_checkpoint, TRAINER_STATE), encoding="utf-8") as stream:
            step = json.load(stream)["global_step"]
        logger.info("resuming from %s: its %d optimizer steps are done", resume_from_checkpoint, step)
        return str(resume_from_checkpoint)

    def train(self, resume_from_checkpoint: str | bool | None = None, trial: Any = None, **kwargs: Any):
        """``Trainer.train`` from :meth:`resolve_resume`'s checkpoint.

        Raises:
            ValueError: what :meth:`resolve_resume` refuses.
            hf_icot.errors.RunPreempted: a preemption signal arrived; its message says where the checkpoint is and
                how to continue.
            hf_icot.errors.PreemptedAfterTraining: in a recipe's run, a signal arrived after the last step began
                (raised once the last step's checkpoint is saved).
        """
        output = super().train(
            resume_from_checkpoint=self.resolve_resume(resume_from_checkpoint), trial=trial, **kwargs
        )
        step = self.preemption.preempted_at
        if step is not None:
            name = self.preemption.received.name if self.preemption.received is not None else "a signal"
            folder = self._last_checkpoint() or self.args.output_dir
            raise RunPreempted(
                f"preempted by {name} after step {step} of {self.state.max_steps}: saved {folder}; continue with "
                "the same command and --resume_from_checkpoint true."
            )
        if self.preemption.through_end:
            folder = self._save_final_checkpoint()
            if folder is not None:
                steps = f"{self.state.global_step} of {self.state.max_steps}"
                self.preemption.raise_from_now_on(
                    lambda name: (
                        f"preempted by {name} after the last step ({steps}): saved {folder}; continue with "
                        "the same command and --resume_from_checkpoint true, which skips training."
                    ),
                    self.args,
                )
            else:  # unguarded: a signal keeps its usual effect rather than being caught and ignored
                self.preemption.release()
        return output

    def _init_training_state(
        self, max_steps, num_update_steps_per_epoch, num_train_epochs, resume_from_checkpoint, trial
    ):
        # Resumed with every step done (a run stopped after training): no epoch to run, not even the rest of one.
        epochs, steps = super()._init_training_state(
            max_steps, num_update_steps_per_epoch, num_train_epochs, resume_from_checkpoint, trial
        )
        if resume_from_checkpoint is None or self.state.global_step < max_steps:
            if (
                resume_from_checkpoint is not None
                and not self.args.save_only_model
                and not _has_optimizer_state(resume_from_checkpoint)
            ):
                raise ValueError(
                    f"{resume_from_checkpoint} holds only the weights of a finished run ({self.state.global_step} "
                    f"steps), not its optimizer, so it cannot train on to {max_steps} steps; resume with the "
                    "run's own number of steps, or start a new run from its model."
                )
            return epochs, steps
        return num_train_epochs, 0

    def _save_final_checkpoint(self) -> str | None:
        """The checkpoint of the last step, saved now if training left none: what a run stopped after training
        resumes from, with nothing left to train, so it holds the weights and trainer state only (no optimizer).
        Returns its folder; None when the disk has no room for it (the run goes on, unguarded)."""
        name = f"{PREFIX_CHECKPOINT_DIR}-{self.state.global_step}"
        last = self._last_checkpoint()
        if last is not None and os.path.basename(last) == name:
            return last
        saved = self.args.save_only_model, self.args.save_total_limit
        self.args.save_only_model, self.args.save_total_limit = True, None  # no rotation: it goes when the run ends
        try:
            self._save_checkpoint(self.model, trial=None)
        except DiskFullError as error:
            logger.warning("%s Going on without it: a preemption from now on loses the training.", error)
            return None
        finally:
            self.args.save_only_model, self.args.save_total_limit = saved
        self.final_checkpoint = os.path.join(self.args.output_dir, name)
        return self.final_checkpoint

    def finish_run(self, succeeded: bool) -> None:
        """End of the run (:class:`hf_icot.command_line.recipe.RecipeRun` calls it): a finished run removes the
        checkpoint :meth:`_save_final_checkpoint` added (its weights are the saved model), then the preemption
        signals get their handlers back."""
        self.preemption.hold()  # the work is done: a signal now must not leave a half-removed checkpoint
        if succeeded and self.final_checkpoint is not None and self.args.should_save:
            shutil.rmtree(self.final_checkpoint, ignore_errors=True)
        self.final_checkpoint = None
        self.preemption.release()

    def _step_description(self, step: int) -> str:
        """What messages say of ``step`` beyond its number (a curriculum's stage); empty here."""
        return ""

    def training_step(self, model, inputs, num_items_in_batch=None):
        """``Trainer.training_step``; a NaN or infinite loss stops training before the optimizer step.

        Raises:
            hf_icot.errors.NonFiniteLossError: one sentence naming the step, the loss, the learning rate and the last
                complete checkpoint.
        """
        loss = super().training_step(model, inputs, num_items_in_batch)
        if not torch.isfinite(loss).all():
            step = self.state.global_step + 1  # the step being computed, counted from 1 as the logs count
            last = self._last_checkpoint()
            raise NonFiniteLossError(
                f"the training loss is {loss.item()} at step {step}{self._step_description(step - 1)} with learning "
                f"rate {self._get_learning_rate():.3g}; training stopped before the optimizer step, and the last good "
                f"checkpoint is {last or 'none (none was saved)'}; lower the learning rate (or slow the curriculum) "
                "and resume from it."
            )
        return loss

    def end_processes(self, wait: bool = True) -> None:
        """Wait for every process, then tear the process group down while the interpreter is fully alive.

        Call it once, last, in a multi-process script (a no-op on one process; it also runs at exit, without the
        wait, if the script does not call it). ``Accelerator.end_training`` alone is not enough: the DDP wrapper
        still holds the gloo process group, and when the group is only freed during interpreter shutdown its C++
        threads can abort the process (SIGABRT, "terminate called without an active exception") after all the work
        is done. The model itself (``self.model``) stays usable.
        """
        if not torch.distributed.is_available() or not torch.distributed.is_initialized():
            return
        if wait:
            self.accelerator.wait_for_everyone()
        self.model_wrapped = self.model
        self.accelerator.free_memory()  # drops the accelerator's references to the DDP wrapper
        gc.collect()
        self.accelerator.end_training()

    def _save_checkpoint(self, model: Any, trial: Any) -> None:
        """``Trainer._save_checkpoint`` under a marker: transformers writes the files straight into
        ``checkpoint-<step>`` (model, optimizer, scheduler, each process's RNG state, ``trainer_state.json``), with no
        barrier before ``trainer_state.json`` and no staging, and deletes older checkpoints right after; a kill in
        between must not leave a folder that looks resumable, nor none at all."""
        folder = os.path.join(self._get_output_dir(trial=trial), f"{PREFIX_CHECKPOINT_DIR}-{self.state.global_step}")
        marker = os.path.join(folder, CHECKPOINT_WRITING)
        if self.args.should_save:
            os.makedirs(folder, exist_ok=True)
            open(marker, "w").close()
        limit = self.args.save_total_limit
        self.args.save_total_limit = None  # rotation waits until this checkpoint is complete
        failure = None
        try:
            super()._save_checkpoint(model, trial)
        except Exception as error:  # noqa: BLE001  (every process must learn of it before any raises)
            failure = error
        finally:
            self.args.save_total_limit = limit
        if self._any_process(failure is not None):  # also the barrier: every RNG state and optimizer shard written
            self._abandon_checkpoint(folder, failure)
        if self.args.should_save:
            os.remove(marker)
            rotate_checkpoints(
                output_dir=os.path.dirname(folder),
                save_total_limit=limit,
                best_model_checkpoint=self.state.best_model_checkpoint,
                use_mtime=True,
            )

    def _any_process(self, flag: bool) -> bool:
        """Whether ``flag`` holds on any process; a collective, so also a barrier."""
        if self.accelerator.num_processes == 1:
            return flag
        return bool(self.accelerator.gather(torch.tensor([int(flag)], device=self.args.device)).max().item())

    def _abandon_checkpoint(self, folder: str, failure: Exception | None) -> None:
        """Remove the checkpoint a process failed to write, then raise: a full disk as one sentence, any other
        failure as it was (on the processes that did not fail: a sentence saying another one did)."""
        full = failure is not None and is_disk_full(failure, folder)  # read before the removal frees the space
        written = folder_bytes(folder)
        if self.args.should_save:
            shutil.rmtree(folder, ignore_errors=True)
        previous = self._last_checkpoint()
        if full:
            weights = sum(p.numel() * p.element_size() for p in self.model.parameters())
            estimate = weights * (1 if self.args.save_only_model else 3)  # AdamW keeps two moments per weight
            needed = max(folder_bytes(previous) if previous else 0, written, estimate)
            raise disk_full_error(
                os.path.dirname(folder),
                os.path.basename(folder),
                needed,
                f"then resume with --resume_from_checkpoint true (from {previous or 'the start: none was saved'})",
            ) from None
        if failure is not None:
            raise failure
        raise RuntimeError(f"another process failed to write {folder}, so it was removed; see that process's error.")


class CheckpointedTrainer(SafeRunMixin, Trainer):
    """``transformers.Trainer`` with kill-safe checkpoints and resume from the last complete one (the module
    docstring), for recipes that train without a curriculum (the marginals study)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._register_safeguards()
