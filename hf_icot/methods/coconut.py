"""Coconut (Hao et al. 2024, "Training Large Language Models to Reason in a Continuous Latent Space",
``facebookresearch/coconut``, its ``coconut.py`` and ``run.py``): the CoT's first reasoning steps give way, stage by
stage, to continuous thoughts, each the last hidden state fed back as the next input embedding.

The stages — which steps an example loses and how many latent slots stand in their place, the optimizer resets, the
start stage — are the plan of :class:`hf_icot.curriculum.latent.Coconut`. This method renders each example at that
plan, and its loss is the cross entropy of the latent sequence's labels: the remaining CoT steps, ``<eos>``,
``#### answer <eos>`` (never the question, the markers or the slots), as its ``Coconut.forward``.

With ``simcot`` (:mod:`hf_icot.methods.simcot`) an auxiliary decoder learns to write each replaced step from its
``c_thought`` thoughts, as SIM-CoT's Coconut path does (:meth:`CoconutMethod.step_rule`).

Its option ``latent_token_init`` copies a named token's input-embedding and output rows into the three latent markers'
before training, as its ``run.py`` copies ``<<``'s; unset, the markers keep transformers' mean initialisation (drawn
when the tokenizer was widened).

**Text format** (the plan's ``latent_format``, :mod:`hf_icot.data.latent_formats`): ``coconut`` gives the token ids,
labels, attention masks and position ids of Coconut's ``dataset.py`` — ``tokenizer.encode(question + "\n")`` with
special tokens, each step ``+ "\n"`` and ``"### " + answer`` without, then ``<eos>``, at every stage, ``c_thought``,
``pad_latent_to_max`` and ``max_latent_stage`` — and its ``MyCollator``'s padding: only the rows that have a latent
slot are left-padded, so that their first slots share a column, the rest right-padded with the pad token (its
``run.py`` sets pad = eos), position ids 0 on padding. A reasoning step is one entry of the data's ``cot`` list, as one
entry of its ``steps``. Latent generation asks ``question\n <|start-latent|> <|latent|>×n <|end-latent|>`` (its
``get_question_latent_dataset``) and reads the answer after the last ``#``, commas removed, as its ``run.py``. What
still differs: its ``generate`` takes one question at a time and recomputes the sequence at every token (ours batches
and caches, the same greedy tokens), and it appends its first generated token even when that is ``<eos>``, where ours
stops. The default format ``hf_icot`` is this toolkit's: ``question <eos> … <|end-latent|> [steps] <eos> #### answer
<eos>``, every row aligned on its ``<|start-latent|>``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import torch

from hf_icot.curriculum.base import option
from hf_icot.curriculum.layout import LATENT_TOKENS
from hf_icot.methods.base import MethodConfig
from hf_icot.methods.latent import LatentMethod, LatentOutput, labelled_cross_entropy
from hf_icot.methods.latent_forward import causal_lm_of, latent_hidden_states
from hf_icot.methods.simcot import SIMCoTConfig, StepRule, StepSupervision


@dataclass
class CoconutConfig(SIMCoTConfig):
    """Coconut's options beside its curriculum's (and SIM-CoT's, which every latent method takes)."""

    latent_token_init: str | None = option(
        None,
        "Initialise the latent markers' embedding and output rows from this token's before training (Coconut's code "
        "copies '<<'); unset: transformers' mean initialisation.",
    )


def coconut_loss(
    lm: Any,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    position_ids: torch.Tensor,
    labels: torch.Tensor,
    latent_id: int,
    supervision: StepSupervision | None = None,
    **unused: Any,
) -> LatentOutput:
    """The mean cross entropy of a latent micro-batch's labels, the thoughts fed back; with ``supervision``, plus
    SIM-CoT's step loss (read from the batch's ``simcot_*`` keys)."""
    states = latent_hidden_states(lm, input_ids, attention_mask, position_ids, latent_id)
    output = LatentOutput(loss=labelled_cross_entropy(lm, states.hidden, labels))
    return supervision.add_to(output, lm, states, unused) if supervision is not None else output


def copy_token_rows(model: Any, tokenizer: Any, source: str, targets: tuple[str, ...]) -> None:
    """Give each of ``targets`` the input-embedding row and output-layer row of the token ``source`` (one copy where
    the two are tied).

    Raises:
        ValueError: ``source`` not a single token of the tokenizer's vocabulary.
    """
    vocabulary = tokenizer.get_vocab()
    if source not in vocabulary:
        raise ValueError(
            f"latent_token_init {source!r} is not a token of the tokenizer's vocabulary; give one of its tokens "
            "(Coconut's GPT-2 runs use '<<'), or leave it unset."
        )
    lm = causal_lm_of(model)
    rows = [vocabulary[token] for token in targets]
    with torch.no_grad():
        for weight in {
            id(w): w for w in (lm.get_input_embeddings().weight, lm.get_output_embeddings().weight)
        }.values():
            weight[rows] = weight[vocabulary[source]].clone()


class CoconutMethod(LatentMethod):
    """Coconut on :class:`hf_icot.training.trainer.ICoTTrainer` (see the module docstring)."""

    schedules: ClassVar[tuple[str, ...]] = ("coconut",)
    config_class: ClassVar[type[MethodConfig]] = CoconutConfig
    config: CoconutConfig

    def prepare_model(self, model: Any, tokenizer: Any, seed: int, max_cot_steps: int | None) -> None:
        """As :meth:`LatentMethod.prepare_model`, after refusing a ``max_latent_stage`` beyond the longest CoT and
        copying ``latent_token_init``'s rows.

        Raises:
            ValueError: those, a model that cannot take latent thoughts, or a tokenizer without the markers.
        """
        self.schedule.check_longest_cot(max_cot_steps)
        if self.config.latent_token_init is not None:
            copy_token_rows(model, tokenizer, self.config.latent_token_init, LATENT_TOKENS)
        super().prepare_model(model, tokenizer, seed, max_cot_steps)

    def step_rule(self) -> StepRule:
        """SIM-CoT's Coconut path: ``c_thought`` thoughts per step, a group past the replaced steps writes the answer,
        positions from 1, each row's token cross entropy summed."""
        return StepRule(self.schedule.c_thought, answer_when_no_step=True, first_position=1, per_row_sum=True)

    def loss(self, lm: Any, latent_id: int, **batch: Any) -> LatentOutput:
        return coconut_loss(lm, latent_id=latent_id, supervision=self.supervision, **batch)
