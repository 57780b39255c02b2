"""Continuous-thought curricula: the CoT's reasoning steps give way to latent thoughts instead of leaving the sequence.

* :class:`Coconut` (Hao et al. 2024, "Training Large Language Models to Reason in a Continuous Latent Space",
  ``facebookresearch/coconut``): at stage ``k`` the first ``k`` reasoning steps are replaced by ``k × c_thought``
  latent slots; past ``max_latent_stage`` every remaining step goes too. Stage 0 is the full CoT (with the latent
  markers around no slot), so a run starts from a CoT model as Coconut's does.
* :class:`CODI` (Shen et al. 2025, "Compressing Chain-of-Thought into Continuous Space via Self-Distillation",
  ``zhenyi4/codi``): one stage; every example's CoT gives way to ``num_latent`` continuous thoughts (its teacher
  sequence, projection and distillation are the method's: :mod:`hf_icot.methods.codi`).
* :class:`PCCoT` (Wu et al. 2025, "Parallel Continuous Chain-of-Thought with Jacobi Iteration", ``whyNLP/PCCoT``):
  CODI's plan, ``num_latent_tokens`` thoughts computed together by ``num_iterations`` Jacobi iterations instead of one
  pass each (its forward, teacher and losses: :mod:`hf_icot.methods.pccot`).

Where the papers and their code are silent or this toolkit's format differs, these choices are ours:

* a reasoning step is one entry of the data's ``cot`` list; in the default ``latent_format hf_icot`` Coconut's
  ``### answer`` is our ``#### answer`` and CODI's "The answer is:" our ``####`` (distilled at its last token), while
  ``latent_format coconut`` / ``codi`` give their own token ids (:mod:`hf_icot.data.latent_formats`);
* one marker pair, ``<|start-latent|>`` / ``<|end-latent|>``, serves every method (Coconut's names; CODI's
  ``<bot>`` / ``<eot>``, PCCoT's ``<pcot.bot>`` / ``<pcot.eot>``), added to the tokenizer with transformers' mean initialisation (Coconut's code copies
  ``<<``'s: the method's ``latent_token_init``);
* Coconut's optimizer is rebuilt at every epoch boundary, whatever the CoT, as its ``run.py`` does
  (``reset_optimizer_every epoch``); ``epoch_while_cot`` skips a reset once the previous step kept no CoT token (the
  stepwise reference's rule, this toolkit's behaviour before 2026-12-07), ``stage`` resets at stage boundaries (its
  README's words);
* Coconut's ``resume`` (skip the first epochs, continuing from a CoT checkpoint) is ``start_stage``: the run starts at
  that stage, i.e. ``resume = start_stage × epochs_per_stage``;
* padding is masked in every pass.

The schedule says, per example and step, how many CoT steps are replaced and how many latent slots stand in their
place (:meth:`LatentSchedule.latent_plans`); the rendering, the forward that feeds hidden states back, the losses and
latent generation are the methods' (:mod:`hf_icot.methods`). Pure Python, as every curriculum.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar, NamedTuple

from hf_icot.curriculum.base import (
    Schedule,
    _spec,
    check_at_least,
    example_uniforms,
    layout_option,
    option,
)
from hf_icot.curriculum.layout import LATENT_FORMATS, SequenceLayout, check_choice

#: When Coconut's optimizer state is reset: its code rebuilds AdamW at every epoch (its README says per stage);
#: ``epoch_while_cot`` skips the reset once the previous step kept no CoT token (the stepwise reference's rule).
OPTIMIZER_RESETS = ("epoch", "epoch_while_cot", "stage", "never")
ALL_STEPS = 10**9  # "every step": more than any CoT has


class LatentPlan(NamedTuple):
    """One example's latent layout: the CoT steps it loses from the left and the latent slots in their place."""

    skip_steps: int
    n_latent: int


@dataclass
class LatentSchedule(Schedule):
    """What continuous-thought schedules share: a latent :class:`SequenceLayout` (whole steps from the left, no fill
    or hint options, the text format ``latent_format``) and :meth:`latent_plans`."""

    units: ClassVar[tuple[str, ...]] = ("step",)
    sides: ClassVar[tuple[str, ...]] = ("left",)
    #: The text formats this plan's method lays out (its own and this toolkit's).
    latent_formats: ClassVar[tuple[str, ...]] = LATENT_FORMATS
    unit: str = layout_option("unit", "step")
    latent_format: str = option(
        "hf_icot",
        "The latent sequences' text format: hf_icot (question <eos> markers [CoT] <eos> #### answer <eos>), coconut "
        "(the token ids of Coconut's dataset.py: question\\n, steps\\n, ### answer) or codi (those of CODI's "
        "train.py: The answer is: answer).",
        choices=LATENT_FORMATS,
    )

    def __post_init__(self) -> None:
        if self.fill != "drop" or self.hint or self.sequence_format != "hf_icot":
            given = {"removal_fill": self.fill, "length_hint": self.hint, "sequence_format": self.sequence_format}
            name, value = next((k, v) for k, v in given.items() if v not in ("drop", False, "hf_icot"))
            raise ValueError(
                f"{name} {value!r} does not apply to {self.name}: its removed steps become latent thoughts; leave "
                f"{name} unset."
            )
        if self.latent_format not in self.latent_formats:
            raise ValueError(
                f"latent_format {self.latent_format!r} is not allowed for {self.name}; choose one of "
                f"{', '.join(self.latent_formats)}."
            )
        super().__post_init__()

    @property
    def eos_removed(self) -> bool:
        """Whether the layout drops the ``<eos>`` separators (CODI's ``remove_eos``; no other plan has it)."""
        return False

    @property
    def layout(self) -> SequenceLayout:
        """The latent layout at the end of the curriculum (:meth:`layout_at` for a step)."""
        return self.layout_at(None)

    def layout_at(self, step: int | None) -> SequenceLayout:
        """The latent layout after training step ``step`` (None: the end of the curriculum): how many latent slots
        a question gets at inference then."""
        thoughts, per_step = self.inference_thoughts(step)
        return SequenceLayout(
            fill="drop",
            unit="step",
            side="left",
            latent=True,
            latent_thoughts=thoughts,
            latent_per_step=per_step,
            latent_format=self.latent_format,
            remove_eos=self.eos_removed,
            latent_iterations=self.latent_iterations,
        )

    @property
    def latent_iterations(self) -> int | None:
        """Jacobi iterations over all latent slots at once (PCCoT); None: one decoder pass per thought."""
        return None

    def inference_thoughts(self, step: int | None) -> tuple[int, int]:
        """``(latent_thoughts, latent_per_step)`` of :meth:`layout_at`."""
        raise NotImplementedError

    def latent_plans(
        self, step: int, example_ids: Sequence[int], n_steps: Sequence[int], training: bool = True
    ) -> list[LatentPlan]:
        """Each example's :class:`LatentPlan` at optimizer step ``step`` (``n_steps``: its CoT length in steps)."""
        raise NotImplementedError

    def possible_plans(self, n_steps: int) -> list[LatentPlan]:
        """Every plan an example of ``n_steps`` CoT steps can get in training (once the trainer has bound the schedule):
        the one plan of a single-stage schedule."""
        return self.latent_plans(0, [0], [n_steps], training=False)

    def specs(self, step, example_ids, n_tokens=None, n_steps=None, training=True):
        # The text CoT each example keeps: what is removed, whatever stands in its place.
        plans = self.latent_plans(step, example_ids, n_steps or [0] * len(example_ids), training)
        return [_spec("step", "left", min(plan.skip_steps, ALL_STEPS), "drop") for plan in plans]


@dataclass
class Coconut(LatentSchedule):
    """Coconut's multi-stage curriculum (``facebookresearch/coconut``, its ``dataset.py`` and ``run.py``).

    Stage ``s = epoch // epochs_per_stage``; at stage ``s <= max_latent_stage`` an example loses its first ``s`` steps
    and gets ``s × c_thought`` latent slots; past ``max_latent_stage`` it loses every step and gets
    ``min(n_steps, max_latent_stage) × c_thought`` slots (``max_latent_stage × c_thought`` with
    ``pad_latent_to_max``). With probability ``uniform_prob`` an example draws its stage uniformly from
    ``0 … n_steps`` instead. The labels are the remaining steps and the answer (never the question, markers or slots).

    Attributes:
        max_latent_stage: the last stage that adds latent slots; None: the longest CoT of the training data (bound
            by the trainer); larger than that longest CoT is refused.
        max_cot_steps: the longest CoT of the training data, in steps (bound by the trainer).
    """

    name: ClassVar[str] = "coconut"
    latent_formats: ClassVar[tuple[str, ...]] = ("hf_icot", "coconut")
    c_thought: int = option(1, "Latent thoughts per replaced reasoning step (c).")
    epochs_per_stage: int = option(1, "Epochs per stage (stage s replaces the first s steps).")
    max_latent_stage: int | None = option(
        None,
        "The last stage that replaces one more step; past it every remaining step goes (unset: the longest "
        "CoT of the training data, in steps).",
    )
    uniform_prob: float = option(0.0, "Probability that an example draws its stage uniformly (0 … steps).")
    pad_latent_to_max: bool = option(
        False, "Past max_latent_stage, give every example max_latent_stage × c latent slots."
    )
    reset_optimizer_every: str = option(
        "epoch",
        "Reset the Adam state at every epoch boundary (its code), every epoch while the previous step kept CoT "
        "tokens (epoch_while_cot), every stage (its README) or never.",
        choices=OPTIMIZER_RESETS,
    )
    start_stage: int = option(
        0,
        "Start the curriculum at this stage (Coconut's resume = start_stage × epochs_per_stage skipped epochs), e.g. "
        "from a CoT-trained checkpoint given as the model.",
    )
    max_cot_steps: int | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        check_at_least("c_thought", self.c_thought, 1)
        check_at_least("epochs_per_stage", self.epochs_per_stage, 1)
        check_at_least("max_latent_stage", self.max_latent_stage, 0)
        if not 0.0 <= self.uniform_prob <= 1.0:
            raise ValueError(f"uniform_prob {self.uniform_prob} is not allowed; it must be in [0, 1].")
        check_choice("reset_optimizer_every", self.reset_optimizer_every, OPTIMIZER_RESETS)
        check_at_least("start_stage", self.start_stage, 0)
        self.check_longest_cot(self.max_cot_steps)

    def check_longest_cot(self, max_cot_steps: int | None) -> None:
        """Refuse a ``max_latent_stage`` beyond the longest CoT (no example could reach it), and a ``start_stage``
        past the last stage.

        Raises:
            ValueError: naming the numbers.
        """
        if None not in (max_cot_steps, self.max_latent_stage) and self.max_latent_stage > max_cot_steps:
            raise ValueError(
                f"max_latent_stage {self.max_latent_stage} is larger than the longest CoT of the training data "
                f"({max_cot_steps} steps); give at most {max_cot_steps}, or leave it unset."
            )
        last = self.max_latent_stage if self.max_latent_stage is not None else max_cot_steps
        if last is not None and self.start_stage > last + 1:
            raise ValueError(
                f"start_stage {self.start_stage} is past the last stage {last + 1} (max_latent_stage {last}, then every "
                f"step as latent thoughts); give 0 to {last + 1}."
            )

    def bind(self, steps_per_epoch, max_cot_level=None, max_cot_tokens=None, max_cot_steps=None) -> None:
        super().bind(steps_per_epoch, max_cot_level, max_cot_tokens, max_cot_steps)
        self.check_longest_cot(self.max_cot_steps)

    @property
    def last_latent_stage(self) -> int:
        """``max_latent_stage``, or the longest CoT where it is unset (0 before the trainer binds it)."""
        if self.max_latent_stage is not None:
            return self.max_latent_stage
        return self.max_cot_steps or 0

    def _scheduled(self, step: int) -> int:
        if not self.steps_per_epoch:
            return 0
        return self.start_stage + step // self.steps_per_epoch // self.epochs_per_stage

    def stage(self, step: int) -> int:
        return min(self._scheduled(step), self.last_latent_stage + 1)  # past the last latent stage nothing changes

    def removed_count(self, step: int) -> float:
        stage = self.stage(step)
        return math.inf if stage > self.last_latent_stage else float(stage)

    def resets_optimizer_at(self, step: int) -> bool:
        if step <= 0 or not self.steps_per_epoch or self.reset_optimizer_every == "never":
            return False
        if self.reset_optimizer_every in ("epoch", "epoch_while_cot"):
            return step % self.steps_per_epoch == 0
        return self.stage(step) != self.stage(step - 1)

    @property
    def skips_reset_without_cot(self) -> bool:
        return self.reset_optimizer_every == "epoch_while_cot"

    def _plan(self, stage: int, n_steps: int) -> LatentPlan:
        last = self.last_latent_stage
        if stage > last:
            n_latent = last if self.pad_latent_to_max else min(n_steps, last)
            return LatentPlan(ALL_STEPS, n_latent * self.c_thought)
        return LatentPlan(stage, stage * self.c_thought)

    def possible_plans(self, n_steps: int) -> list[LatentPlan]:
        # Every stage's (uniform_prob draws among the same stages).
        return [self._plan(stage, n_steps) for stage in range(self.last_latent_stage + 2)]

    def latent_plans(self, step, example_ids, n_steps, training=True):
        scheduled = self.stage(step)
        if not (training and self.uniform_prob > 0):
            return [self._plan(scheduled, n) for n in n_steps]
        draws = example_uniforms(self.seed, step, example_ids)
        mixed = example_uniforms(self.seed + 1, step, example_ids)  # which stage, for the examples that mix
        return [
            self._plan(int(u * (n + 1)) if m < self.uniform_prob else scheduled, n)
            for u, m, n in zip(draws, mixed, n_steps)
        ]

    def inference_thoughts(self, step):
        # Coconut's evaluation: min(stage, max_latent_stage) × c slots, capped by the question's steps unless padded.
        stage = min(self.last_latent_stage, self.last_latent_stage + 1 if step is None else self.stage(step))
        return stage * self.c_thought, 0 if self.pad_latent_to_max else self.c_thought

    def describe_stage(self, step: int) -> str:
        stage = self.stage(step)
        if stage > self.last_latent_stage:
            return f"all CoT steps; up to {self.last_latent_stage * self.c_thought} latent thoughts"
        if stage == 0:
            return "nothing (full CoT)"
        return f"the first {stage} CoT step(s), as {stage * self.c_thought} latent thoughts"


@dataclass
class CODI(LatentSchedule):
    """CODI's plan (``zhenyi4/codi``): one stage in which every example's CoT gives way to ``num_latent`` continuous
    thoughts. Its teacher sequence, projection and losses are the method's (:mod:`hf_icot.methods.codi`).

    ``remove_eos`` (CODI's ``TrainingArguments.remove_eos``, default False as there; its training and test scripts
    pass True) is declared here, on the plan, and carried by the layout (:attr:`SequenceLayout.remove_eos`) rather
    than by the method's config: it changes the student sequence — no ``<eos>`` between the question and
    ``<|start-latent|>``, none after ``<|end-latent|>`` — which latent generation must lay out the same way, as well as
    the teacher's (no ``<eos>`` around its CoT). It belongs to CODI's format, so it needs ``latent_format codi``.
    """

    name: ClassVar[str] = "codi"
    latent_formats: ClassVar[tuple[str, ...]] = ("hf_icot", "codi")
    num_latent: int = option(6, "Continuous thoughts between the latent markers.")
    remove_eos: bool = option(
        False,
        "Leave out the <eos> after the question and after <|end-latent|>, and around the teacher's CoT (CODI's "
        "--remove_eos, True in its scripts); needs latent_format codi.",
    )

    @property
    def eos_removed(self) -> bool:
        return self.remove_eos

    def __post_init__(self) -> None:
        super().__post_init__()
        check_at_least("num_latent", self.num_latent, 0)

    def removed_count(self, step: int) -> float:
        return math.inf

    def latent_plans(self, step, example_ids, n_steps, training=True):
        return [LatentPlan(ALL_STEPS, self.num_latent)] * len(example_ids)

    def inference_thoughts(self, step):
        return self.num_latent, 0

    def describe_stage(self, step: int) -> str:
        return f"all CoT steps, as {self.num_latent} continuous thoughts (CoT teacher distilled at the answer)"


@dataclass
class PCCoT(LatentSchedule):
    """PCCoT's plan (``whyNLP/PCCoT``): CODI's one stage, every example's CoT given way to ``num_latent_tokens``
    continuous thoughts, computed together by ``num_iterations`` Jacobi iterations. Its teacher sequence, projection
    and losses are the method's (:mod:`hf_icot.methods.pccot`). The options' names and defaults are its code's
    (``PCCoTArguments.num_latent_tokens``, ``PCCoTGPT2Config.num_iterations``)."""

    name: ClassVar[str] = "pccot"
    num_latent_tokens: int = option(6, "Continuous thoughts between the latent markers, computed together.")
    num_iterations: int = option(
        6,
        "How many Jacobi iterations: decoder passes over all the thoughts at once after the prompt's (0: the slots "
        "stay <|latent|> tokens).",
    )

    def __post_init__(self) -> None:
        check_at_least("num_latent_tokens", self.num_latent_tokens, 1)
        check_at_least("num_iterations", self.num_iterations, 0)  # before the layout that carries them is built
        super().__post_init__()

    @property
    def latent_iterations(self) -> int:
        return self.num_iterations

    def removed_count(self, step: int) -> float:
        return math.inf

    def latent_plans(self, step, example_ids, n_steps, training=True):
        return [LatentPlan(ALL_STEPS, self.num_latent_tokens)] * len(example_ids)

    def inference_thoughts(self, step):
        return self.num_latent_tokens, 0

    def describe_stage(self, step: int) -> str:
        return (
            f"all CoT steps, as {self.num_latent_tokens} continuous thoughts from {self.num_iterations} Jacobi "
            "iterations (CoT teacher distilled at the answer)"
        )
