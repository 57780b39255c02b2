"""What any ``Trainer`` of a recipe needs to survive being killed: checkpoints written under a marker, resume from the
last complete one, and a process group torn down before exit.

:class:`SafeRunMixin` goes in front of ``transformers.Trainer`` (:class:`hf_icot.training.trainer.ICoTTrainer` mixes it
in; :class:`CheckpointedTrainer` is the plain ``Trainer`` with it, for recipes without a curriculum):

* a checkpoint is written under :data:`~hf_icot.training.run_folder.CHECKPOINT_WRITING`, removed once every process
  has written its part; older checkpoints are rotated out only then;
* ``train(resume_from_checkpoint=True)`` takes the last *complete* checkpoint (transformers' own lookup would take
  the last one even if a killed run left it half-written) and refuses an incomplete one in one sentence;
* :meth:`SafeRunMixin.end_processes` tears the process group down while the interpreter is alive (also at exit, when a
  script forgets).
"""

from __future__ import annotations

import atexit
import gc
import json
import logging
import os
import weakref
from typing import Any

import torch
from transformers import Trainer
from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR, rotate_checkpoints

from hf_icot.training.run_folder import CHECKPOINT_WRITING, TRAINER_STATE, checkpoint_problem, last_complete_checkpoint

logger = logging.getLogger(__name__)


def _end_processes_at_exit(trainer: weakref.ref) -> None:
    alive = trainer()
    if alive is not None:
        alive.end_processes(wait=False)  # other processes may already be gone: no barrier


class SafeRunMixin:
    """Kill-safe checkpoints, resume from the last complete one, process teardown (see the module docstring)."""

    def _register_teardown(self) -> None:
        """Call once the ``Trainer`` is built: a script that forgets :meth:`end_processes` still tears the group
        down before interpreter shutdown."""
        if torch.distributed.is_available() and torch.distributed.is_initialized():
            atexit.register(_end_processes_at_exit, weakref.ref(self))

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
        try:
            super()._save_checkpoint(model, trial)
        finally:
            self.args.save_total_limit = limit
        self.accelerator.wait_for_everyone()  # every process's RNG state and optimizer shard is written
        if self.args.should_save:
            os.remove(marker)
            rotate_checkpoints(
                output_dir=os.path.dirname(folder),
                save_total_limit=limit,
                best_model_checkpoint=self.state.best_model_checkpoint,
                use_mtime=True,
            )


class CheckpointedTrainer(SafeRunMixin, Trainer):
    """``transformers.Trainer`` with kill-safe checkpoints and resume from the last complete one (the module
    docstring), for recipes that train without a curriculum (the marginals study)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._register_teardown()

    def train(self, resume_from_checkpoint: str | bool | None = None, trial: Any = None, **kwargs: Any):
        """``Trainer.train`` from :meth:`resolve_resume`'s checkpoint."""
        return super().train(resume_from_checkpoint=self.resolve_resume(resume_from_checkpoint), trial=trial, **kwargs)
