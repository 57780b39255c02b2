"""A method: how a run's CoT leaves the sequence, as one object that :class:`hf_icot.training.trainer.ICoTTrainer`
calls at fixed points. The trainer knows no method by name; a method knows its own options, modules, batches, loss
and files.

* :class:`MethodConfig` — a method's own options, a dataclass whose fields are declared with
  :func:`hf_icot.curriculum.base.option` (help, choices, flat name), so ``ICoTConfig``, a recipe YAML and ``--help``
  set and describe them as they do a schedule's fields.
* :class:`Method` — the token-removal family (every curriculum of :mod:`hf_icot.curriculum` that truncates the CoT):
  the collator renders each example at the schedule's spec and the trainer computes the causal-LM loss. The
  continuous-thought methods (:mod:`hf_icot.methods.latent`, :mod:`~hf_icot.methods.coconut`,
  :mod:`~hf_icot.methods.codi`) override its hooks.

Its plan — which CoT steps an example loses at a step, and what stands in their place — stays with the schedule
(:mod:`hf_icot.curriculum`): a method reads ``self.schedule`` and never decides the curriculum.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar


@dataclass
class MethodConfig:
    """A method without options of its own (the token-removal family)."""

    def to_dict(self) -> dict[str, Any]:
        """The options as plain values (checkpoints, ``icot_schedule.json``, the model card)."""
        return dataclasses.asdict(self)


class Method:
    """The token-removal family: a run of any truncating curriculum (stepwise, staged, Log-ICoT, mixture, …).

    Args:
        schedule: the run's curriculum (:class:`hf_icot.curriculum.Schedule`).
        config: the method's options (an instance of :attr:`config_class`; default: its defaults).

    The trainer calls, in this order: :meth:`prepare_dataset` on every dataset the collator prepared,
    :meth:`prepare_model` (before the Trainer wraps the model), :meth:`render` for
    every micro-batch at its exact optimizer step, :meth:`compute_loss` in every forward, :meth:`logs` with every
    training log, :meth:`save_files` / :meth:`load_files` beside every saved model and checkpoint.
    """

    #: The schedules this method runs (empty: every schedule no other method claims).
    schedules: ClassVar[tuple[str, ...]] = ()
    config_class: ClassVar[type[MethodConfig]] = MethodConfig
    #: Whether sequences carry continuous thoughts (the layout is latent).
    latent: ClassVar[bool] = False

    def __init__(self, schedule: Any, config: MethodConfig | None = None) -> None:
        self.schedule = schedule
        self.config = config if config is not None else self.config_class()

    @property
    def name(self) -> str:
        """The method's name: its schedule's (``stepwise``, ``coconut``, …)."""
        return self.schedule.name

    def prepare_model(self, model: Any, tokenizer: Any, seed: int, max_cot_steps: int | None) -> None:
        """Ready ``model`` for training before the Trainer wraps it (extra modules, a forward of its own)."""

    def prepare_dataset(self, dataset: Any, tokenizer: Any) -> Any:
        """``dataset``, prepared by the collator, with the method's own id columns added once (what its rendering
        reads beyond the collator's columns; the collator's ``rendering_view`` keeps them): none here."""
        return dataset

    def check_fits(self, dataset: Any, context: int | None) -> None:
        """Refuse, before the first training step, a model whose ``context`` (its positions) cannot take the longest
        sequence this method renders from ``dataset``: nothing here (the collator checks the token sequences).

        Raises:
            ValueError: in a method whose sequences outgrow the ones the collator checks.
        """

    def render(
        self, examples: Sequence[Mapping[str, Any]], step: int, training: bool, collator: Any
    ) -> tuple[dict[str, Any], list[int]]:
        """One micro-batch of prepared examples rendered for optimizer step ``step``, and the CoT tokens each kept."""
        specs = self.schedule.specs(
            step,
            [example["example_id"] for example in examples],
            n_tokens=[example["n_cot_tokens"] for example in examples],
            n_steps=[example["n_cot_steps"] for example in examples],
            training=training,
        )
        return collator.render_counted(examples, specs)

    def compute_loss(self, model: Any, inputs: Mapping[str, Any]) -> Any:
        """The method's own forward and loss (an output with ``loss``), or None: the trainer's causal-LM loss."""
        return None

    def logs(self) -> dict[str, float]:
        """What the method adds to a training log (then forgets)."""
        return {}

    def training_only_modules(self, model: Any) -> list[Any]:
        """Modules the method hangs on ``model`` for training alone, which answering never runs (none here)."""
        return []

    def save_files(self, model: Any, folder: str) -> None:
        """Write the method's own files beside a saved model (nothing here)."""

    def load_files(self, model: Any, folder: str) -> None:
        """Read back what :meth:`save_files` wrote (resuming from a checkpoint)."""

    def to_dict(self) -> dict[str, Any]:
        """The method's options (empty for the token-removal family)."""
        return self.config.to_dict()
