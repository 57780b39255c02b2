"""What the continuous-thought methods share (:mod:`hf_icot.methods.coconut`, :mod:`hf_icot.methods.codi`): a
:class:`LatentMethod` checks that the model can take latent thoughts, renders each example at its schedule's
:class:`~hf_icot.curriculum.latent.LatentPlan` (:class:`~hf_icot.methods.latent_batches.LatentRenderer`), and gives
the model a forward that computes the method's whole loss in the one call DDP expects
(:func:`~hf_icot.methods.latent_forward.enable_latent_forward`). Every one of them takes SIM-CoT's step supervision
(``simcot``, :mod:`hf_icot.methods.simcot`): its decoder, batches and loss term ride on the method's.

A method's loss is a mean over the micro-batch (the public codes' ``CrossEntropyLoss()``), which the trainer divides by
the gradient-accumulation steps as those codes do. Logits are computed only at the labelled positions (the output layer
on the gathered hidden states: the same cross entropy as on every position's logits).
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import torch
from transformers.utils import ModelOutput

from hf_icot.methods.base import Method
from hf_icot.methods.latent_batches import LatentRenderer
from hf_icot.methods.latent_forward import causal_lm_of, check_latent_model, enable_latent_forward
from hf_icot.methods.simcot import (
    LOG_NAME,
    StepRule,
    StepSupervision,
    decoder_of,
    load_decoder,
    save_decoder,
    supervision_for,
)
from hf_icot.modeling.labelled_logits import causal_lm_loss, predicting_positions


@dataclass
class LatentOutput(ModelOutput):
    """The loss, and a method's named terms (unweighted, detached) where it has them (CODI's three, SIM-CoT's)."""

    loss: torch.Tensor | None = None
    student_ce: torch.Tensor | None = None
    distill: torch.Tensor | None = None
    teacher_ce: torch.Tensor | None = None
    step_ce: torch.Tensor | None = None


def states_at(states: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
    """``(B, H)``: each row of ``states`` ``(B, T, H)`` at its position (``positions`` ``(B,)``)."""
    return states[torch.arange(states.shape[0], device=states.device), positions.to(states.device)]


def labelled_cross_entropy(lm: Any, hidden: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """The mean cross entropy of ``labels`` from the last hidden states ``(B, T, H)``, logits at labelled positions."""
    positions = predicting_positions(labels)  # (B, T)
    logits = lm.get_output_embeddings()(hidden[positions])  # (N, V)
    return causal_lm_loss(logits, labels, positions)


class LatentMethod(Method):
    """A continuous-thought method: subclasses give :meth:`loss` (adding :attr:`supervision`'s term) and
    :meth:`step_rule`, and may add modules (:meth:`attach_modules`), batch keys (:meth:`extra_batch`) and logged terms
    (:attr:`logged_terms`). Their config carries SIM-CoT's options (:class:`~hf_icot.methods.simcot.SIMCoTConfig`)."""

    latent: ClassVar[bool] = True
    #: Output fields averaged between two training logs, logged as ``<method>/<term>``.
    logged_terms: ClassVar[tuple[str, ...]] = ()
    renderer: LatentRenderer | None = None
    #: SIM-CoT's step supervision, when the config asks for it (``simcot``).
    supervision: StepSupervision | None = None

    def prepare_model(self, model: Any, tokenizer: Any, seed: int, max_cot_steps: int | None) -> None:
        """Check the model, attach the method's modules and give it its latent forward.

        Raises:
            ValueError: a model family that cannot take latent thoughts, or a tokenizer without the latent markers.
        """
        lm = causal_lm_of(model)
        check_latent_model(lm)
        self.renderer = self.make_renderer(tokenizer)
        self.attach_modules(model, seed)
        if getattr(self.config, "simcot", False):  # SIM-CoT is an option of the methods whose config takes it
            self.supervision = supervision_for(model, tokenizer, self.renderer, self.step_rule(), self.config)
        latent_id = self.renderer.tokens.latent
        enable_latent_forward(model, lambda lm, **batch: self.loss(lm, latent_id=latent_id, **batch))
        self._terms: dict[str, list[float]] = {}

    def check_fits(self, dataset: Any, context: int | None) -> None:
        """The latent sequences can be longer than the token ones the collator checked (c thoughts in the place of a
        one-token step): the longest 32 training examples in tokens and the 32 of most CoT steps are rendered at
        every plan their schedule can give them (:meth:`~hf_icot.curriculum.latent.LatentSchedule.possible_plans`).
        A dataset without a length (streamed) is not checked.

        Raises:
            ValueError: one of them longer than ``context``, naming its length, its thoughts and the model's positions.
        """
        if context is None or self.renderer is None or not hasattr(dataset, "__len__") or len(dataset) == 0:
            return
        columns = {name: dataset[name] for name in ("question_ids", "cot_ids", "answer_ids", "n_cot_steps")}
        tokens = [
            len(q) + len(c) + len(a)
            for q, c, a in zip(*(columns[n] for n in ("question_ids", "cot_ids", "answer_ids")))
        ]
        steps = columns["n_cot_steps"]
        picks = set(heapq.nlargest(32, range(len(tokens)), key=tokens.__getitem__))
        picks |= set(heapq.nlargest(32, range(len(steps)), key=steps.__getitem__))
        for index in sorted(picks):
            example = dataset[index]
            for plan in self.schedule.possible_plans(example["n_cot_steps"]):
                length = len(self.renderer.row(example, plan).ids)
                if length > context:
                    raise ValueError(
                        f"--schedule {self.schedule.name}: training example {index} is {length} tokens with "
                        f"{plan.n_latent} continuous thoughts, longer than the model's {context} positions; give the "
                        "model more positions (scratch_model's n_positions, or --n_positions) or fewer thoughts."
                    )

    def make_renderer(self, tokenizer: Any) -> LatentRenderer:
        """The renderer of this method's sequences."""
        return LatentRenderer(tokenizer, self.schedule.layout)

    def attach_modules(self, model: Any, seed: int) -> None:
        """Hang the method's own modules on the model (drawn from ``seed``); none here."""

    def step_rule(self) -> StepRule:
        """How SIM-CoT's decoder reads this method's thoughts (:class:`~hf_icot.methods.simcot.StepRule`)."""
        raise NotImplementedError

    def supervised_steps(self, example: Mapping[str, Any], plan: Any) -> int:
        """How many of ``example``'s first CoT steps its thoughts stand for under ``plan`` (what SIM-CoT's groups
        write): those the plan replaced."""
        return min(plan.skip_steps, example["n_cot_steps"])

    def render(self, examples, step, training, collator):
        n_steps = [example["n_cot_steps"] for example in examples]
        ids = [example["example_id"] for example in examples]
        plans = self.schedule.latent_plans(step, ids, n_steps, training)
        batch, kept = self.renderer.render(examples, plans)
        batch.update(self.extra_batch(examples))
        if self.supervision is not None:
            supervised = [self.supervised_steps(example, plan) for example, plan in zip(examples, plans)]
            n_latent = [plan.n_latent for plan in plans]
            batch.update(self.supervision.batch(examples, n_latent, supervised, batch["input_ids"]))
        return batch, kept

    def extra_batch(self, examples: Sequence[Mapping[str, Any]]) -> dict[str, torch.Tensor]:
        """Tensors the loss reads beside the latent sequence (CODI's teacher); none here."""
        return {}

    def loss(self, lm: Any, latent_id: int, **batch: Any) -> LatentOutput:
        """The method's loss on one rendered micro-batch, computed inside the model's forward."""
        raise NotImplementedError

    def compute_loss(self, model, inputs):
        outputs = model(**inputs, icot_latent=True)
        if model.training:
            for name in self.logged_terms:
                self._terms.setdefault(f"{self.name}/{name}", []).append(float(outputs[name]))
            if outputs.get("step_ce") is not None:  # a micro-batch without thoughts supervises none
                self._terms.setdefault(LOG_NAME, []).append(float(outputs["step_ce"]))
        return outputs

    def logs(self) -> dict[str, float]:
        terms, self._terms = getattr(self, "_terms", {}), {}
        return {name: sum(values) / len(values) for name, values in terms.items() if values}

    def training_only_modules(self, model: Any) -> list[Any]:
        """SIM-CoT's decoder, where there is one."""
        decoder = decoder_of(model)
        return [decoder] if decoder is not None else []

    def save_files(self, model: Any, folder: str) -> None:
        """SIM-CoT's decoder, with what decoding a thought needs (the thoughts a question gets at inference)."""
        if self.supervision is not None:
            save_decoder(model, folder, self.supervision.settings(self.schedule.layout.latent_thoughts))

    def load_files(self, model: Any, folder: str) -> None:
        if self.supervision is not None:
            load_decoder(folder, model)
