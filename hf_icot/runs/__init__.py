"""What keeps a run safe, for any ``transformers.Trainer`` (the ICoT trainer and the studies' plain ones alike):

* :mod:`~hf_icot.runs.checkpoints` — kill-safe checkpoints, resume from the last complete one, a non-finite loss or a
  full disk stopping the run cleanly, process teardown (:class:`~hf_icot.runs.checkpoints.SafeRunMixin`,
  :class:`~hf_icot.runs.checkpoints.CheckpointedTrainer`);
* :mod:`~hf_icot.runs.run_folder` — which checkpoints are complete, whether a run would write over another one, the
  run's identity a resume must match;
* :mod:`~hf_icot.runs.run_lock` — one run at a time in a run folder;
* :mod:`~hf_icot.runs.preemption` — a scheduler's signal saves a checkpoint and stops with the line to continue;
* :mod:`~hf_icot.runs.runtime` — CPU threads under ``accelerate launch``, logging from callbacks.

Importing this package loads no torch (the class below is loaded on first use).
"""

from hf_icot._lazy import lazy_exports

_EXPORTS = {"CheckpointedTrainer": "hf_icot.runs.checkpoints"}
__getattr__ = lazy_exports(__name__, _EXPORTS)
__all__ = list(_EXPORTS)
