"""The steps every recipe repeats, once: a recipe's ``main`` is its study's own steps inside a :class:`RecipeRun`.

::

    def main(script_args, training_args, model_args):
        with RecipeRun(training_args) as run:                      # threads, run folder, seed; teardown at exit
            data = run.load_data(script_args, build=build_dataset)  # built on the fly or loaded; splits; card info
            ...                                                     # the study: model, trainer, callbacks
            trainer = run.track(ICoTTrainer(...))
            trainer.train(resume_from_checkpoint=run.resume_from)
            ...
            run.write_records({STAGES_FILE: run.stages(trainer)})

Entering the run, in this order and before any data are built:

1. :func:`hf_icot.runs.runtime.use_all_cpu_threads` — a lone CPU process that ``accelerate launch`` left with one
   thread gets every core back;
2. :class:`hf_icot.runs.run_lock.RunLock` — no other run is writing into the run folder now (the lock is held
   until the run ends, and dropped by the kernel if it dies);
3. :func:`hf_icot.runs.run_folder.prepare_run_folder` — a new run never writes over another one, and
   ``--resume_from_checkpoint PATH|true`` names a complete checkpoint of this run (:attr:`RecipeRun.resume_from`);
4. ``transformers.set_seed(training_args.seed)``.

A tracked trainer catches the preemption signals until the run ends, not only while it trains: once training is over
its weights wait in a checkpoint, and a signal during the final evaluation, saving, card or push ends the run with
exit status 75 and the line to continue (:mod:`hf_icot.runs.preemption`).

Leaving it, every tracked trainer removes that checkpoint if the run finished, gives the signals back
(:meth:`~hf_icot.runs.checkpoints.SafeRunMixin.finish_run`) and tears its process group down
(:meth:`~hf_icot.runs.checkpoints.SafeRunMixin.end_processes`), also when the study's steps raise.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hf_icot.publishing.saving import write_text_atomic


@dataclass
class RunData:
    """A run's data: every split, the training split, the evaluation splits (name → split) and what the model card
    says of the data (``source``, ``config``, ``task``, ``fingerprint``, ``splits``: rows per split)."""

    dataset: Any
    train: Any
    evaluation_sets: dict[str, Any]
    info: dict[str, Any]


@dataclass
class RecipeRun:
    """A recipe's run (see the module docstring); use it as a context manager."""

    training_args: Any
    resume_from: str | None = None
    trainers: list[Any] = field(default_factory=list)
    lock: Any = None  # the run folder's RunLock, on the main process

    def __enter__(self) -> RecipeRun:
        from transformers import set_seed

        from hf_icot.runs.run_folder import prepare_run_folder
        from hf_icot.runs.runtime import use_all_cpu_threads

        use_all_cpu_threads(on_cpu=self.training_args.device.type == "cpu")  # `accelerate launch` pins 1 thread
        self._lock_run_folder()  # before the folder is looked at: no other run is writing into it
        try:
            self.resume_from = prepare_run_folder(self.training_args)  # before any work: never over another run
        except BaseException:
            self._release()
            raise
        set_seed(self.training_args.seed)
        return self

    def __exit__(self, *exc_info: Any) -> None:
        # Left to interpreter shutdown, the process group's threads can abort a rank (SIGABRT).
        try:
            for trainer in self.trainers:
                trainer.finish_run(succeeded=exc_info[0] is None)
                trainer.end_processes(wait=exc_info[0] is None)
        finally:
            self._release()

    def _lock_run_folder(self) -> None:
        """Take the run folder's lock on the main process (:mod:`hf_icot.runs.run_lock`); every process is
        refused with its sentence when another run holds it."""
        from hf_icot.runs.run_lock import RunLock

        args = self.training_args
        refusal = None
        if args.process_index == 0:
            self.lock = RunLock(args.output_dir)
            try:
                self.lock.acquire()
            except ValueError as error:
                refusal = str(error)
        if args.world_size > 1:
            import torch.distributed

            shared = [refusal]
            torch.distributed.broadcast_object_list(shared, src=0)
            refusal = shared[0]
        if refusal is not None:
            raise ValueError(refusal)

    def _release(self) -> None:
        if self.lock is not None:
            self.lock.release()

    def track(self, trainer: Any) -> Any:
        """Guard ``trainer``'s run against preemption through its end, and tear its processes down when the run
        ends; returns it."""
        trainer.preemption.through_end = True
        self.trainers.append(trainer)
        return trainer

    def load_data(self, script_args: Any, build: Callable[[str, Any], tuple[Any, dict]] | None = None) -> RunData:
        """The run's data from ``script_args`` (:class:`hf_icot.command_line.arguments.ScriptArguments`): the task built
        on the fly with ``build(task, task_args)`` (``datasets_builder.build_dataset``, which the library does not
        import) or a dataset loaded from a folder or the Hub; its splits cut to ``max_*_examples``; the
        ``--eval_files`` read as extra evaluation splits.

        Raises:
            ValueError: a task without a ``build``, a loaded dataset with a bad row
                (:func:`hf_icot.data.row_checks.check_rows`), or what loading and splitting refuse (one sentence each).
        """
        from hf_icot.data.loading import load_run_data, read_evaluation_split, run_splits

        if script_args.task is not None:
            if build is None:
                raise ValueError(f"--task {script_args.task!r} needs a dataset builder; give --dataset_name_or_path.")
            dataset, info = build(script_args.task, script_args.task_args)
        else:
            from hf_icot.data.row_checks import check_rows

            dataset, info = load_run_data(script_args.dataset_name_or_path, script_args.dataset_config)
            check_rows(dataset)  # a bad row is refused now, naming split, row and column, not deep in training
        limit = script_args.max_eval_examples
        train, evaluation_sets = run_splits(dataset, script_args.eval_splits, script_args.max_train_examples, limit)
        for name, source in (getattr(script_args, "eval_files", None) or {}).items():
            split = read_evaluation_split(source)  # e.g. the reference's own valid/test files
            evaluation_sets[name] = split if limit is None else split.select(range(min(len(split), limit)))
        info["splits"] = {name: len(split) for name, split in dataset.items()}
        info["splits"].update(
            {name: len(evaluation_sets[name]) for name in getattr(script_args, "eval_files", None) or {}}
        )
        return RunData(dataset, train, evaluation_sets, info)

    @staticmethod
    def stages(trainer: Any) -> list[dict[str, Any]]:
        """The curriculum's stages over the run's steps, as the model card lists them."""
        return trainer.schedule.describe(trainer.state.max_steps)

    def write_records(self, records: Mapping[str, Any], output_dir: str | None = None) -> None:
        """Write each ``name -> JSON-ready value`` into the run folder, each file whole or not at all (main process
        only)."""
        if not self.training_args.should_save:
            return
        folder = output_dir or self.training_args.output_dir
        for name, value in records.items():
            write_text_atomic(Path(folder) / name, json.dumps(value, indent=2, default=str) + "\n")


def run_main(
    main: Callable[..., Any],
    parse: Callable[[], tuple] | None = None,
    errors: tuple[type[BaseException], ...] = (ValueError,),
) -> None:
    """A recipe's ``__main__``: log to stderr, parse its command line (default:
    :func:`hf_icot.command_line.arguments.parse_recipe_args`), run ``main``, and end a bad input (``errors``) with its one
    sentence and exit status 1 instead of a traceback; a run stopped by its circumstances
    (:class:`hf_icot.errors.RunStopped`: preempted, diverged, out of disk space) ends with its sentence and its
    ``exit_status`` (75 when preempted).

    It sets nothing for the whole process: ``draw_dropout_ahead`` draws its masks in the step with the C kernel while
    torch's threads spin (libgomp's default); its helper thread is used only where the environment itself sets
    ``OMP_WAIT_POLICY=PASSIVE`` (``bench/README.md``: "The lever in the step, with spinning threads")."""
    import logging
    import sys

    from hf_icot.command_line.arguments import parse_recipe_args
    from hf_icot.errors import PreemptedAfterTraining, RunPreempted, RunStopped

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    try:
        main(*(parse or parse_recipe_args)())
    except (RunStopped, PreemptedAfterTraining) as error:
        if _is_main_process():  # every process stops with it; one says why
            preempted = isinstance(error, (RunPreempted, PreemptedAfterTraining))
            print(f"{'' if preempted else 'error: '}{error}", file=sys.stderr, flush=True)
        sys.exit(error.exit_status)
    except errors as error:
        sys.exit(f"error: {error}")


def _is_main_process() -> bool:
    import os

    return os.environ.get("RANK", "0") == "0"
