"""Process settings a run needs before it trains: the CPU threads that ``accelerate launch`` takes away.

``accelerate launch`` (checked on 1.15) always exports ``OMP_NUM_THREADS`` to the script it starts
(``accelerate/utils/launch.py``: line 195 for one process, line 393 for torchrun). Unless
``--num_cpu_threads_per_process`` is given, the value is the launcher's own ``OMP_NUM_THREADS``, else 1
(``accelerate/commands/launch.py``, ``_validate_launch_command``, lines 1364-1378). Only with ``use_cpu`` (a config
file's ``use_cpu: true``, or ``--cpu`` together with ``--num_processes 1``), ``OMP_NUM_THREADS`` unset and at least one
process does it become one thread per physical core. Without a config file ``--num_processes`` defaults to the number
of CUDA devices (line 1324), 0 on a CPU-only machine, so there even ``--cpu`` leaves it at 1. A one-process CPU run of
``accelerate launch recipes/icot_gpt2.py`` therefore trains on one core where ``python recipes/icot_gpt2.py`` uses all
of them (8.6 against 13.3 steps/s for the quickstart on 2 cores).

:func:`use_all_cpu_threads` undoes that one case and leaves every thread count somebody chose.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

logger = logging.getLogger(__name__)

#: Exported by every accelerate launcher to the script it starts (``accelerate/utils/launch.py`` lines 175, 284, 558)
#: and by nothing else we know of: its presence says "started by accelerate launch".
ACCELERATE_LAUNCH_MARK = "ACCELERATE_MIXED_PRECISION"
#: Where launchers put the number of processes of a run (the names accelerate's own ``PartialState`` reads).
WORLD_SIZE_VARIABLES = ("WORLD_SIZE", "PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "MV2_COMM_WORLD_SIZE")
THREADS_FLAG = "--num_cpu_threads_per_process"


@dataclass(frozen=True)
class Launcher:
    """The process that started this one, as it was started: its command line and its initial environment."""

    argv: Sequence[str] = ()
    environ: Mapping[str, str] = field(default_factory=dict)


def find_launcher() -> Launcher | None:
    """The parent process's command line and the environment it was started with, or ``None`` where they cannot be
    read (psutil missing, a process of another user, a platform that hides them)."""
    try:
        import psutil  # a dependency of accelerate
    except ImportError:
        return None
    try:
        parent = psutil.Process(os.getppid())
        return Launcher(tuple(parent.cmdline()), dict(parent.environ()))
    except (psutil.Error, OSError):
        return None


def physical_cores() -> int:
    """The cores torch uses when nothing sets its thread count: the physical cores, at most as many as the CPUs this
    process may run on (its affinity mask, where the platform has one); at least 1."""
    try:
        import psutil

        cores = psutil.cpu_count(logical=False)
    except ImportError:
        cores = None
    cores = cores or os.cpu_count() or 1
    if hasattr(os, "sched_getaffinity"):
        cores = min(cores, len(os.sched_getaffinity(0)))
    return max(cores, 1)


def _passes_threads_flag(argv: Sequence[str]) -> bool:
    """Whether ``argv`` gives ``--num_cpu_threads_per_process`` (accelerate also accepts dashes; no abbreviations)."""
    return any(arg.split("=", 1)[0].replace("-", "_") == THREADS_FLAG.replace("-", "_") for arg in argv)


def cpu_threads_to_restore(
    environ: Mapping[str, str], launcher: Launcher | None, *, on_cpu: bool, cores: int, torch_threads: int
) -> int | None:
    """How many torch threads to set, or ``None`` to leave the count alone: the decision of
    :func:`use_all_cpu_threads`, given everything it reads.

    Args:
        environ: this process's environment.
        launcher: what :func:`find_launcher` read of the parent process, ``None`` when it could not be read.
        on_cpu: whether this process trains on the CPU.
        cores: the cores to use (:func:`physical_cores`).
        torch_threads: ``torch.get_num_threads()`` now.

    Returns:
        ``cores`` when this process runs alone on the CPU with one thread because ``accelerate launch`` exported its
        default ``OMP_NUM_THREADS=1``; ``None`` in every other case, in particular when the 1 was chosen: exported
        before ``accelerate launch`` (it is in the launcher's environment) or given as
        ``--num_cpu_threads_per_process 1`` (it is on the launcher's command line). Where the launcher cannot be
        read, a 1 under ``accelerate launch`` is taken for the launcher's default.
    """
    if not on_cpu or cores <= 1 or torch_threads != 1:
        return None  # the thread count matters little on a GPU, cannot grow, or was already set in this process
    if any(environ.get(name, "1").strip() != "1" for name in WORLD_SIZE_VARIABLES):
        return None  # processes of one run share the cores: the launcher's split is the right one
    if environ.get("OMP_NUM_THREADS", "").strip() != "1" or ACCELERATE_LAUNCH_MARK not in environ:
        return None  # not the launcher's 1: unset (torch already takes every core), another count, or no accelerate
    if launcher is None:
        return cores
    if ACCELERATE_LAUNCH_MARK in launcher.environ:
        return None  # the parent was itself started by accelerate (or exported its variables): the 1 is not its own
    if "OMP_NUM_THREADS" in launcher.environ or _passes_threads_flag(launcher.argv):
        return None  # the user chose the count, and accelerate passed it on
    return cores


def _trains_on_cpu() -> bool:
    """Whether a process started here would train on the CPU: accelerate was told so, or there is no accelerator."""
    import torch

    if os.environ.get("ACCELERATE_USE_CPU", "").strip().lower() in ("1", "true", "yes"):
        return True
    if hasattr(torch, "accelerator"):  # torch >= 2.6 knows every device type
        return not torch.accelerator.is_available()
    return not torch.cuda.is_available()


def use_all_cpu_threads(on_cpu: bool | None = None) -> int | None:
    """Give torch one thread per core when ``accelerate launch`` left a lone CPU process with one; call it before
    training (and before building data and models, which use the threads too).

    ``OMP_NUM_THREADS`` stays as it is in the environment; only torch's own count (``torch.set_num_threads``) changes,
    so subprocesses this one starts see what the launcher gave. See :func:`cpu_threads_to_restore` for the decision.

    Args:
        on_cpu: whether this process trains on the CPU, e.g. ``training_args.device.type == "cpu"``; by default,
            whether accelerate was told to use the CPU or torch sees no accelerator.

    Returns:
        The thread count set, or ``None`` when the count was left alone.
    """
    import torch

    threads = cpu_threads_to_restore(
        os.environ,
        find_launcher(),
        on_cpu=_trains_on_cpu() if on_cpu is None else on_cpu,
        cores=physical_cores(),
        torch_threads=torch.get_num_threads(),
    )
    if threads is not None:
        torch.set_num_threads(threads)
        logger.info(
            "accelerate launch gave this CPU process OMP_NUM_THREADS=1; training on %d threads, as plain python "
            "does (export OMP_NUM_THREADS or pass --num_cpu_threads_per_process to choose)",
            threads,
        )
    return threads


def log_from_callback(trainer: Any, values: dict[str, Any]) -> None:
    """``trainer.log(values)`` from inside a callback event, keeping the step's pending training-loss log.

    transformers' ``on_log`` clears ``control.should_log``; a callback that logs in ``on_step_end`` of a logging step
    would otherwise make the trainer skip that step's training loss (``loss``, ``grad_norm``, ``learning_rate``).
    """
    control = trainer.control
    pending = control.should_log
    trainer.log(values)
    trainer.control.should_log = pending
