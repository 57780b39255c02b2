"""Why a run stopped before its end, when the cause is the run's circumstances rather than its inputs: a loss gone
non-finite, a full disk, a preemption signal. Each error's message is one sentence saying what happened and what to
do; :func:`hf_icot.command_line.recipe.run_main` ends a recipe with that sentence and the error's ``exit_status``.

Light on purpose (no torch): the training, publishing and dataset-building layers all raise these.
"""

from __future__ import annotations

#: The exit status of a run stopped by a preemption signal after saving a checkpoint (sysexits' EX_TEMPFAIL: "a
#: temporary failure; try again"), distinct from 1 (an error) and from death by a signal (negative in Python, 128 + n
#: in a shell).
PREEMPTED_EXIT_STATUS = 75


class RunStopped(RuntimeError):
    """A run stopped by its circumstances; ``str(error)`` is one sentence, ``exit_status`` the process's status."""

    exit_status = 1


class NonFiniteLossError(RunStopped):
    """The training loss became NaN or infinite; training stopped before the optimizer step."""


class DiskFullError(RunStopped):
    """A write ran out of disk space; what it was writing was removed, earlier files are as they were."""


class RunPreempted(RunStopped):
    """A preemption signal arrived; a complete checkpoint was saved and the run can be resumed from it."""

    exit_status = PREEMPTED_EXIT_STATUS


class PreemptedAfterTraining(BaseException):
    """A preemption signal that arrived after the last optimizer step, raised wherever the run then was (the final
    evaluation, saving, card or push) once the trained weights are in a checkpoint; ``str(error)`` says how to
    continue. A ``BaseException``, as ``KeyboardInterrupt`` is, so that no ``except Exception`` of that work takes it
    for its own failure; :func:`hf_icot.command_line.recipe.run_main` ends the run with it as with :class:`RunPreempted`."""

    exit_status = PREEMPTED_EXIT_STATUS
