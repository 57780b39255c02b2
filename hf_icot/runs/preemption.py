"""Preemption: a scheduler's warning signal (SIGTERM by default; ``--preemption_signals`` chooses) ends the run at
the end of the optimizer step under way, with a complete checkpoint and a line saying how to continue.

:class:`PreemptionCallback` (added by :class:`hf_icot.runs.checkpoints.SafeRunMixin`) catches the signals while
``train()`` runs, and only then: before training and after it (the final evaluation and save) a signal keeps its
usual effect, and the run stays kill-safe. When one has arrived, the processes agree on it at the next step end (a
signal may reach them at different steps), ``TrainerControl.should_save`` saves that step's checkpoint, and after the
save ``should_training_stop`` ends the loop; the trainer then raises :class:`hf_icot.errors.RunPreempted`, whose
exit status is :data:`hf_icot.errors.PREEMPTED_EXIT_STATUS`. The stop is set after the save so that the checkpoint's
``TrainerControl`` state does not carry it into the resumed run.

Through the end of a run: a :class:`hf_icot.command_line.recipe.RecipeRun` sets :attr:`PreemptionCallback.through_end`,
so the signals stay caught after ``train()`` until the run ends. Once training is over the trainer saves the last
step's weights as a checkpoint (if training left none) and calls :meth:`PreemptionCallback.raise_from_now_on`: a
signal then raises :class:`hf_icot.errors.PreemptedAfterTraining` where the run is (evaluating, saving, pushing), and
the resumed run skips training and redoes only what follows it.
"""

from __future__ import annotations

import logging
import signal
import threading
from collections.abc import Callable
from typing import Any

import torch
from transformers import TrainerCallback

from hf_icot.errors import PreemptedAfterTraining

logger = logging.getLogger(__name__)

DEFAULT_SIGNALS = ("SIGTERM",)


def parse_signals(names: Any) -> tuple[signal.Signals, ...]:
    """The signals of ``--preemption_signals`` (``SIGTERM``, ``USR1``, ``sigusr1``; empty or ``none``: none).

    Raises:
        ValueError: a name that is no signal this platform can catch.
    """
    if names is None or (isinstance(names, str) and names.strip().lower() in ("", "none")):
        return ()
    found = []
    for name in [names] if isinstance(names, str) else list(names):
        if str(name).strip().lower() == "none":
            continue
        key = str(name).strip().upper()
        key = key if key.startswith("SIG") else f"SIG{key}"
        number = getattr(signal, key, None)
        if not isinstance(number, signal.Signals) or number in (signal.SIGKILL, signal.SIGSTOP):
            raise ValueError(
                f"--preemption_signals {name!r} is not a signal a run can catch; give names such as SIGTERM, "
                "SIGUSR1 or SIGINT (or none)."
            )
        found.append(number)
    return tuple(dict.fromkeys(found))


class PreemptionCallback(TrainerCallback):
    """Save and stop at the end of the step during which one of ``signals`` arrived (see the module docstring)."""

    def __init__(self, signals: tuple[signal.Signals, ...]) -> None:
        self.signals = signals
        self.received: signal.Signals | None = None
        self.preempted_at: int | None = None
        self._previous: dict[signal.Signals, Any] = {}
        #: Keep catching the signals after ``train()``, until :meth:`release` (a recipe's run sets it).
        self.through_end = False
        self._after_training: Callable[[str], str] | None = None  # the signal's name -> what to raise with

    def _catch(self, number: int, frame: Any) -> None:
        self.received = signal.Signals(number)
        if self._after_training is not None:
            raise PreemptedAfterTraining(self._after_training(self.received.name))

    def on_train_begin(self, args, state, control, **kwargs):
        self.received, self.preempted_at, self._after_training = None, None, None
        if threading.current_thread() is threading.main_thread():  # Python installs handlers in the main thread only
            for number in self.signals:
                previous = signal.signal(number, self._catch)
                self._previous.setdefault(number, previous)  # a second train() in one run keeps the first's

    def on_train_end(self, args, state, control, **kwargs):
        if not self.through_end:
            self.release()

    def raise_from_now_on(self, message: Callable[[str], str], args: Any) -> None:
        """After training, with its weights saved: from now until :meth:`release`, a signal raises
        :class:`~hf_icot.errors.PreemptedAfterTraining` with ``message(signal name)`` where the run is.

        Raises:
            hf_icot.errors.PreemptedAfterTraining: a signal arrived (on any process) since the last step began.
        """
        self._after_training = message  # first: a signal during the agreement below raises as it returns
        if self._agreed(args):
            self._after_training = None
            raise PreemptedAfterTraining(message(self.received.name if self.received is not None else "a signal"))

    def hold(self) -> None:
        """Go back to recording a signal without acting on it: the run's work is done, what is left must finish."""
        self._after_training = None

    def release(self) -> None:
        """Give the signals back their handlers of before the run (a no-op when none were taken)."""
        self._after_training = None
        for number, previous in self._previous.items():
            signal.signal(number, previous)
        self._previous = {}

    def _agreed(self, args: Any) -> bool:
        """Whether any process received a signal (the same answer on every process, at the same step)."""
        if not self.signals:
            return False
        flag = torch.tensor([int(self.received is not None)], device=args.device)
        if torch.distributed.is_available() and torch.distributed.is_initialized():
            torch.distributed.all_reduce(flag, op=torch.distributed.ReduceOp.MAX)
        return bool(flag.item())

    def on_step_end(self, args, state, control, **kwargs):
        if self.preempted_at is None and self._agreed(args):
            self.preempted_at = state.global_step
            control.should_save = True

    def on_save(self, args, state, control, **kwargs):
        if self.preempted_at is not None:
            control.should_training_stop = True

    def on_epoch_end(self, args, state, control, **kwargs):
        if self.preempted_at is not None:  # the step's checkpoint is saved: no second one, no evaluation
            control.should_save = control.should_evaluate = False
