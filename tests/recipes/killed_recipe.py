"""Run a recipe (``recipes/icot_gpt2.py`` unless ``--recipe`` names another) as its own ``__main__``, SIGKILLing the
process at a chosen moment; launched by the resume tests, from the repository root.

    python -m tests.recipes.killed_recipe step N RECIPE_ARGS...         # as optimizer step N + 1 begins
    python -m tests.recipes.killed_recipe checkpoint N RECIPE_ARGS...   # while checkpoint-N is being written
    python -m tests.recipes.killed_recipe final_model 0 RECIPE_ARGS...  # halfway through writing model.safetensors
    python -m tests.recipes.killed_recipe --recipe results/marginals/train.py step N RECIPE_ARGS...
    python -m tests.recipes.killed_recipe sigterm N RECIPE_ARGS...      # SIGTERM to itself as step N + 1 begins
    python -m tests.recipes.killed_recipe sigusr1 N RECIPE_ARGS...      # the same with SIGUSR1
    python -m tests.recipes.killed_recipe hold N RECIPE_ARGS...         # wait as step N + 1 begins (see below)
    python -m tests.recipes.killed_recipe sigterm_group evaluation RECIPE_ARGS...  # after training (see below)
    accelerate launch ... -m tests.recipes.killed_recipe step N RECIPE_ARGS...    # the same on each process

``step`` kills once N steps are done (every checkpoint up to N is written), for any ``Trainer``; ``checkpoint`` kills
after the model, optimizer and scheduler of checkpoint-N are on disk but before its RNG state and
``trainer_state.json``; ``final_model`` writes half of the final model's safetensors bytes, then kills. ``sigterm``
and ``sigusr1`` send the signal instead of killing, as a scheduler warns a job before it kills it, from the first
process only under ``accelerate launch`` (the others must learn of it from that one). ``hold`` writes
``$ICOT_TEST_HOLD/held`` and waits until ``$ICOT_TEST_HOLD/release`` exists (every process). ``sigterm_group``
sends SIGTERM to its whole process group (as a scheduler's cancel does; start the command in a session of its own),
from the first process, once training is over: as the final ``evaluation`` begins, as the final model is ``saved``,
or as the run folder is ``pushed``. The command line after the moment and N is the recipe's own.
"""

from __future__ import annotations

import os
import runpy
import signal
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
#: how a test starts this script, after ``sys.executable`` or ``accelerate launch`` and before its arguments
COMMAND = ["-m", "tests.recipes.killed_recipe"]
RECIPE = "recipes/icot_gpt2.py"


def recipe_module(script: str) -> str:
    """The module of a recipe given by its path from the repository root: ``results/parity/train.py`` is
    ``results.parity.train``."""
    return ".".join(Path(script).with_suffix("").parts)


def kill() -> None:
    sys.stdout.flush()
    sys.stderr.flush()
    os.kill(os.getpid(), signal.SIGKILL)


def kill_at_step(step: int) -> None:
    from transformers import Trainer

    original = Trainer.get_batch_samples

    def get_batch_samples(self, *args, **kwargs):
        if self.state.global_step == step:  # called as each optimizer step begins, after the last one's save
            kill()
        return original(self, *args, **kwargs)

    Trainer.get_batch_samples = get_batch_samples


def signal_at_step(step: int, number: signal.Signals) -> None:
    from transformers import Trainer

    original = Trainer.get_batch_samples

    def get_batch_samples(self, *args, **kwargs):
        if self.state.global_step == step and os.environ.get("RANK", "0") == "0":
            os.kill(os.getpid(), number)
        return original(self, *args, **kwargs)

    Trainer.get_batch_samples = get_batch_samples


def hold_at_step(step: int) -> None:
    import time

    from transformers import Trainer

    original = Trainer.get_batch_samples
    folder = Path(os.environ["ICOT_TEST_HOLD"])

    def get_batch_samples(self, *args, **kwargs):
        if self.state.global_step == step:
            if os.environ.get("RANK", "0") == "0":
                (folder / "held").write_text(str(os.getpid()))
            while not (folder / "release").exists():
                time.sleep(0.1)
        return original(self, *args, **kwargs)

    Trainer.get_batch_samples = get_batch_samples


def kill_in_checkpoint(step: int) -> None:
    from transformers import Trainer

    original = Trainer._save_rng_state

    def save_rng_state(self, output_dir):
        if os.path.basename(output_dir) == f"checkpoint-{step}":
            kill()
        return original(self, output_dir)

    Trainer._save_rng_state = save_rng_state


def kill_in_final_model() -> None:
    import transformers.modeling_utils as modeling_utils
    from safetensors.torch import save

    original = modeling_utils.safe_save_file

    def safe_save_file(tensors, filename, metadata=None):
        if "checkpoint-" in str(filename):
            return original(tensors, filename, metadata=metadata)
        data = save(tensors, metadata=metadata)
        with open(filename, "wb") as stream:
            stream.write(data[: len(data) // 2])
        kill()

    modeling_utils.safe_save_file = safe_save_file


def signal_group_after_training(moment: str) -> None:
    import hf_icot.publishing.hub as hub
    import hf_icot.publishing.saving as saving
    from hf_icot.training.outputs import RunOutputsMixin

    def signal_group() -> None:
        if os.environ.get("RANK", "0") == "0":
            sys.stderr.flush()
            os.killpg(0, signal.SIGTERM)

    def before(original, trained_first=None):
        def patched(*args, **kwargs):
            if trained_first is None or trained_first(*args):
                signal_group()
            return original(*args, **kwargs)

        return patched

    if moment == "evaluation":  # the final evaluation: generation once every step is done
        name = "evaluate_generation" if hasattr(RunOutputsMixin, "evaluate_generation") else "evaluate_splits"
        trained = lambda trainer, *_: trainer.state.global_step >= trainer.state.max_steps  # noqa: E731
        setattr(RunOutputsMixin, name, before(getattr(RunOutputsMixin, name), trained))
    elif moment == "saved":
        saving.move_into = before(saving.move_into)
    else:
        hub.push_output_dir = before(hub.push_output_dir)


if __name__ == "__main__":
    recipe, arguments = RECIPE, sys.argv[1:]
    if arguments[0] == "--recipe":
        recipe, arguments = arguments[1], arguments[2:]
    moment, at, *recipe_argv = arguments
    if moment == "sigterm_group":
        signal_group_after_training(at)
        at = "0"
    {
        "step": kill_at_step,
        "checkpoint": kill_in_checkpoint,
        "final_model": lambda _: kill_in_final_model(),
        "sigterm": lambda n: signal_at_step(n, signal.SIGTERM),
        "sigusr1": lambda n: signal_at_step(n, signal.SIGUSR1),
        "hold": hold_at_step,
        "sigterm_group": lambda _: None,
    }[moment](int(at))
    sys.argv = [str(REPO / recipe), *recipe_argv]
    # alter_sys, as running the file does: the recipe is sys.modules["__main__"] while it runs, where its dataclasses
    # resolve their annotations
    runpy.run_module(recipe_module(recipe), run_name="__main__", alter_sys=True)
