"""Train a tiny GPT-2 with ICoTTrainer on the counting task; launched by the resume and multi-process tests
from the repository root.

    python -m tests.hf_icot.train_tiny_icot OUT [--max_steps N] [--kill_at_step K] [--resume CHECKPOINT]
    accelerate launch --multi_gpu --num_processes 2 -m tests.hf_icot.train_tiny_icot OUT

Everything (data, tokenizer, initial weights) is rebuilt from fixed seeds, so separate runs are comparable. Each
process appends one JSON line per optimizer step to ``OUT/schedule-rank<r>.jsonl`` (the step, stage, scheduled
count, optimizer resets, the truncation of a few fixed example ids and, under ``--schedule adaptive``, the pace state;
the answer accuracy each step measured goes to ``OUT/accuracy-rank<r>.jsonl``) and, at the end, writes the
final weights to ``OUT/final-rank<r>.safetensors``, its log history to ``OUT/log-rank<r>.json`` and whether the
process group's DDP wrapper was freed by ``ICoTTrainer.end_processes`` to ``OUT/teardown-rank<r>.json`` (with
``--leave_teardown_to_exit`` the script does not call it, keeps the trainer alive, and records at exit what
ICoTTrainer's exit handler left).
``--kill_at_step K`` SIGKILLs the process when step K begins; ``--term_at_step K`` sends it SIGTERM then (a preemption:
the run saves a checkpoint after the step and exits 75). ``--schedule coconut|codi|pccot`` trains a latent method,
``--simcot`` with SIM-CoT's step supervision (its decoder's weights are among the final ones).
"""

from __future__ import annotations

import argparse
import atexit
import json
import os
import signal
import sys
import weakref
from pathlib import Path

import torch
from safetensors.torch import save_file
from transformers import TrainerCallback

from hf_icot.curriculum.layout import LATENT_TOKENS
from hf_icot.data.tokenization import build_word_level_tokenizer
from hf_icot.errors import RunStopped
from hf_icot.training.config import ICoTConfig
from hf_icot.training.trainer import ICoTTrainer
from tests.hf_icot.tiny_task import counting_examples, tiny_gpt2

#: how a test starts this script, after ``sys.executable`` or ``accelerate launch`` and before its arguments
COMMAND = ["-m", "tests.hf_icot.train_tiny_icot"]
WATCHED_IDS = list(range(6))


class ScheduleLog(TrainerCallback):
    """Writes what the curriculum decided at each step, and kills the process on request."""

    def __init__(self, trainer: ICoTTrainer, path: Path, kill_at_step: int | None, term_at_step: int | None = None):
        self.trainer, self.path, self.kill_at_step, self.term_at_step = trainer, path, kill_at_step, term_at_step

    def on_step_begin(self, args, state, control, **kwargs):
        step = state.global_step
        if self.kill_at_step is not None and step == self.kill_at_step:
            os.kill(os.getpid(), signal.SIGKILL)
        if self.term_at_step is not None and step == self.term_at_step:  # a scheduler's notice: finish the step
            os.kill(os.getpid(), signal.SIGTERM)
        schedule = self.trainer.schedule
        record = {
            "step": step,
            "stage": schedule.stage(step),
            "removed": str(schedule.removed_count(step)),
            "resets": self.trainer.optimizer_resets,
            "steps_per_epoch": schedule.steps_per_epoch,
            "specs": [str(spec) for spec in schedule.specs(step, WATCHED_IDS, [8] * 6, [8] * 6)],
        }
        if schedule.layout.latent:  # the latent slots and kept steps of the watched examples (6 steps each)
            record["plans"] = [list(plan) for plan in schedule.latent_plans(step, WATCHED_IDS, [6] * 6)]
        if schedule.needs_answer_accuracy:  # what the pace has decided and measured so far
            record["pace"] = schedule.state_dict()
        with self.path.open("a", encoding="utf-8") as stream:
            stream.write(json.dumps(record) + "\n")

    def on_step_end(self, args, state, control, **kwargs):
        if self.trainer.schedule.needs_answer_accuracy:  # the accuracy this step handed to the schedule
            record = {"step": state.global_step - 1, "answer_accuracy": self.trainer.last_answer_accuracy}
            with self.path.with_name(self.path.name.replace("schedule-", "accuracy-")).open("a") as stream:
                stream.write(json.dumps(record) + "\n")


#: The adaptive pace of ``--schedule adaptive``: on this task the answer accuracy crosses 0.2 after about 20 steps.
ADAPTIVE = dict(adaptive_threshold=0.2, adaptive_window=2, min_steps_per_removal=2, max_steps_per_removal=8)
#: The latent methods: Coconut one stage per epoch (7 steps) with 2 thoughts per step and some examples on a stage of
#: their own; CODI with its projection (drawn from the run's seed); PCCoT with its projection, 3 thoughts from 2 Jacobi
#: iterations.
LATENT = {
    "coconut": dict(c_thought=2, epochs_per_stage=1, uniform_prob=0.3),
    "codi": dict(num_latent=2, use_prj=True, prj_dim=16, prj_dropout=0.1),
    "pccot": dict(num_latent_tokens=3, num_iterations=2, use_projection=True),
}


def build_trainer(
    out: Path,
    max_steps: int = 24,
    save_steps: int = 4,
    remove_per_epoch: float = 3,
    schedule: str = "stepwise",
    simcot: bool = False,
) -> ICoTTrainer:
    """The run every launch of this script makes: seeds fixed, so runs are comparable."""
    train, _ = counting_examples(length=6, n_test=8)  # 56 examples: 7 steps of 8 per epoch on one process
    tokenizer = build_word_level_tokenizer(train, extra_tokens=LATENT_TOKENS if schedule in LATENT else ())
    init = out / f"init-rank{os.environ.get('RANK', '0')}"
    model = tiny_gpt2(len(tokenizer), init, n_layer=1, n_embd=32, seed=0)
    args = ICoTConfig(
        output_dir=str(out / "run"),
        schedule=schedule,
        remove_per_epoch=remove_per_epoch,
        **(ADAPTIVE if schedule == "adaptive" else LATENT.get(schedule, {})),
        **({"simcot": True} if simcot else {}),
        removal_smoothing_lambda=0.2,
        reset_optimizer=True,
        max_steps=max_steps,
        per_device_train_batch_size=8,
        learning_rate=3e-3,
        lr_scheduler_type="linear",
        logging_steps=5,
        save_steps=save_steps,
        report_to="none",
        use_cpu=True,
        seed=7,
        keep_stage_checkpoints=False,
        disable_tqdm=True,
    )
    return ICoTTrainer(model=model, args=args, train_dataset=train, processing_class=tokenizer)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("out", type=Path)
    parser.add_argument("--max_steps", type=int, default=24)
    parser.add_argument("--kill_at_step", type=int, default=None)
    parser.add_argument("--term_at_step", type=int, default=None)
    parser.add_argument("--resume", default=None)
    parser.add_argument("--save_steps", type=int, default=4)
    parser.add_argument("--leave_teardown_to_exit", action="store_true")
    parser.add_argument("--schedule", default="stepwise", choices=["stepwise", "adaptive", *LATENT])
    parser.add_argument("--simcot", action="store_true", help="SIM-CoT's step supervision (a latent schedule)")
    options = parser.parse_args()
    torch.set_num_threads(1)
    if options.leave_teardown_to_exit:  # registered first, so it runs after ICoTTrainer's own exit handler
        atexit.register(record_teardown_at_exit, options.out)
    trainer = build_trainer(
        options.out, options.max_steps, options.save_steps, schedule=options.schedule, simcot=options.simcot
    )
    rank = trainer.args.process_index
    trainer.add_callback(
        ScheduleLog(trainer, options.out / f"schedule-rank{rank}.jsonl", options.kill_at_step, options.term_at_step)
    )
    try:
        trainer.train(resume_from_checkpoint=options.resume)
    except RunStopped as stopped:  # preempted: the checkpoint is written, the exit status says so (75)
        sys.exit(stopped.exit_status)
    wrapped = weakref.ref(trainer.model_wrapped)
    # Every trained tensor (CODI's projection included), as the run trained it.
    weights = {name: p.detach().clone().contiguous() for name, p in trainer.model.named_parameters()}
    save_file(weights, str(options.out / f"final-rank{rank}.safetensors"))
    (options.out / f"log-rank{rank}.json").write_text(json.dumps(trainer.state.log_history, default=str))
    if options.leave_teardown_to_exit:
        KEPT_UNTIL_EXIT.append((trainer, wrapped))
        return
    trainer.end_processes()
    teardown = {"wrapper": type(wrapped()).__name__ if wrapped() is not None else None}
    (options.out / f"teardown-rank{rank}.json").write_text(json.dumps(teardown))


KEPT_UNTIL_EXIT: list = []  # (trainer, weakref to its DDP wrapper): alive until interpreter shutdown


def record_teardown_at_exit(out: Path) -> None:
    """At exit, after ICoTTrainer's handler: is the process group gone, and the DDP wrapper with it?"""
    _, wrapped = KEPT_UNTIL_EXIT[0]
    teardown = {
        "wrapper": type(wrapped()).__name__ if wrapped() is not None else None,
        "group_initialized": torch.distributed.is_initialized(),
    }
    (out / f"teardown-rank{os.environ.get('RANK', '0')}.json").write_text(json.dumps(teardown))


if __name__ == "__main__":
    main()
