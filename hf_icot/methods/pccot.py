"""PCCoT (Wu et al. 2025, "Parallel Continuous Chain-of-Thought with Jacobi Iteration", arXiv:2506.18582,
``whyNLP/PCCoT``, its ``models/modeling_gpt2.py``, ``modeling_llama.py``, ``data_processor.py``, ``generate.py``):
CODI's teacher and student in one model, the student's continuous thoughts computed together by Jacobi iteration
instead of one decoder pass each.

How its code trains, read from it (``PCCoTGPT2LMHeadModel.forward``, the same in ``PCCoTLlamaForCausalLM.forward``,
and ``COTDataProcessor``; its paper was not at hand here, so where the two might differ the code is followed):

* **Sequences.** The teacher is ``question steps[:-1] "The answer is:" answer <eos>`` (the CoT without its last step),
  right-padded, labelled after the question. The student is the question left-padded, then ``<bot> <latent>×n <eot>
  "The answer is:" answer <eos>`` right-padded, so every row's slots share columns; its labels are what follows
  ``<eot>``. ``n`` is ``num_latent_tokens`` (its ``PCCoTArguments``; default 6, its GPT-2 script 24).
* **The prompt's pass.** The decoder runs over the question, ``<bot>`` and the ``n`` slots *as ``<latent>`` tokens*
  (padding masked). Slot ``j``'s first input is the hidden state this pass left at position ``j - 1`` (slot 0: the
  state at ``<bot>``), through the projection where ``use_projection``. The pass's KV cache up to ``<bot>`` is kept.
* **The iterations.** ``num_iterations`` times (its config; default 6, its GPT-2 script 3), the decoder runs over the
  ``n`` slots alone on that question cache; afterwards slot 0 keeps its input and slot ``j >= 1`` takes the state
  this pass left at slot ``j - 1``. The answer part then runs on the cache of the last iteration, whose inputs are the
  ones the iteration before produced (its loop computes one more update that nothing reads). Nothing is detached:
  gradients flow through every iteration, the prompt's pass and the question cache. So the thoughts cost
  ``num_iterations + 1`` passes whatever ``n``; after ``k`` iterations the first ``k`` slots equal the sequential
  forward's (Coconut's, CODI's), all of them once ``num_iterations >= n``.
* **Loss.** ``loss_alpha × teacher CE + loss_beta × student CE + loss_gamma × distillation`` (defaults 1, 1, 1;
  its ``cot_loss``, ``ccot_loss``, ``kd_loss``). The cross entropies are means over labelled tokens. The distillation
  compares, at the last token of the answer prompt, the student's hidden state with the teacher's (detached) at every
  layer's output, the embeddings excluded: smooth L1 per element; with ``use_layerwise_std`` (default) each layer's
  terms divided by the std of the teacher's states at that layer (over the batch and hidden size), then averaged;
  without it the mean divided by the std of all of them.
* **Projection** (``use_projection``, default off): Linear(h, h), GELU, Linear(h, h), LayerNorm(h), a submodule of the
  model initialised as the model's own layers (``post_init``).
* **Generation** (``generate.py``): the same forward on the prompt up to ``"The answer is:"``, then greedy decoding on
  its cache.

This module renders both halves in this toolkit's format and computes that loss
(:func:`~hf_icot.methods.latent_forward.jacobi_hidden_states` is the student's forward); its plan (thoughts and
iterations) is :class:`hf_icot.curriculum.latent.PCCoT`, and evaluation asks the model with the layout's
``latent_iterations`` (:func:`hf_icot.methods.generation.generate_latent`). Where its code and this toolkit differ or
its paper and code are silent, these choices are ours:

* its ``<bot>`` / ``<latent>`` / ``<eot>`` are ``<|start-latent|>`` / ``<|latent|>`` / ``<|end-latent|>``, its
  "The answer is:" is ``####`` (distilled at its last token), and an ``<eos>`` closes the question and the CoT, as
  every hf_icot sequence (:mod:`hf_icot.methods.latent_batches`);
* padding is masked in every pass: its iteration passes are given no attention mask, so a row's slots attend to the
  left padding of its question there (a row's result then depends on the longest question of its batch); on batches
  without padding the two agree (``bench/latent_vs_public/pccot.py``);
* position ids count each row's real tokens from 0 in every family (its GPT-2 code does; its Llama code counts the
  padding too, which rotary attention does not see once padding is masked);
* its generation is given "The answer is:" after ``<eot>``; here the prompt ends at ``<|end-latent|>`` and the model
  writes ``<eos> ####`` itself, as in every hf_icot latent mode (both are trained on those tokens);
* the projection is drawn from the run's seed with the model's ``_init_weights``, and saved beside the model as CODI's
  (``latent_projection.safetensors``); under LoRA the marker rows stay frozen (its LoRA trains the rows of its three
  markers, pad and eos through peft's ``trainable_token_indices``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import torch

from hf_icot.curriculum.base import check_at_least, option
from hf_icot.methods.base import MethodConfig
from hf_icot.methods.latent import LatentMethod, LatentOutput, labelled_cross_entropy, states_at
from hf_icot.methods.latent_batches import teacher_batch
from hf_icot.methods.latent_forward import (
    LatentProjection,
    attach_projection,
    causal_lm_of,
    jacobi_hidden_states,
    load_projection,
    projection_of,
    save_projection,
)


@dataclass
class PCCoTConfig(MethodConfig):
    """PCCoT's options beside its plan's, named as its ``PCCoTGPT2Config`` names them, with its defaults."""

    loss_alpha: float = option(1.0, "Weight of the CoT teacher's cross entropy (its cot_loss).")
    loss_beta: float = option(1.0, "Weight of the latent student's cross entropy (its ccot_loss).")
    loss_gamma: float = option(1.0, "Weight of the distillation at the answer marker (its kd_loss).")
    use_layerwise_std: bool = option(
        True,
        "Divide each layer's distillation by the teacher's std at that layer (false: the whole distillation by the "
        "teacher's std over every layer).",
    )
    use_projection: bool = option(
        False,
        "Pass each fed-back thought through a projection (Linear, GELU, Linear, LayerNorm at the model's width).",
    )

    def __post_init__(self) -> None:
        for name in ("loss_alpha", "loss_beta", "loss_gamma"):
            check_at_least(name, getattr(self, name), 0)


def pccot_loss(
    lm: Any,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    position_ids: torch.Tensor,
    labels: torch.Tensor,
    answer_positions: torch.Tensor,
    teacher_input_ids: torch.Tensor,
    teacher_attention_mask: torch.Tensor,
    teacher_labels: torch.Tensor,
    teacher_answer_positions: torch.Tensor,
    latent_id: int,
    iterations: int,
    config: PCCoTConfig,
    **unused: Any,
) -> LatentOutput:
    """PCCoT's loss on one micro-batch (the student half, and the teacher half of
    :func:`~hf_icot.methods.latent_batches.teacher_batch`), its three terms beside it (unweighted, detached)."""
    teacher = lm.get_decoder()(
        input_ids=teacher_input_ids, attention_mask=teacher_attention_mask, output_hidden_states=True
    )
    teacher_ce = labelled_cross_entropy(lm, teacher.last_hidden_state, teacher_labels)
    hidden, layers, _ = jacobi_hidden_states(
        lm, input_ids, attention_mask, position_ids, latent_id, iterations, projection_of(lm), all_layers=True
    )
    student_ce = labelled_cross_entropy(lm, hidden, labels)
    first = hidden.shape[1] - layers[0].shape[1]  # the answer's pass starts after the last slot
    # Every layer's output (the embeddings left out) at the last token of '####': (N, B, H).
    student = torch.stack([states_at(layer, answer_positions - first) for layer in layers[1:]])
    target = torch.stack([states_at(layer, teacher_answer_positions) for layer in teacher.hidden_states[1:]]).detach()
    terms = torch.nn.functional.smooth_l1_loss(student, target, reduction="none")  # (N, B, H)
    if config.use_layerwise_std:
        n_layers = target.shape[0]
        distill = (terms.reshape(n_layers, -1) / target.reshape(n_layers, -1).std(dim=-1, keepdim=True)).mean()
    else:
        distill = terms.mean() / target.std()
    loss = config.loss_alpha * teacher_ce + config.loss_beta * student_ce + config.loss_gamma * distill
    return LatentOutput(
        loss=loss, student_ce=student_ce.detach(), distill=distill.detach(), teacher_ce=teacher_ce.detach()
    )


class PCCoTMethod(LatentMethod):
    """PCCoT on :class:`hf_icot.training.trainer.ICoTTrainer` (see the module docstring); its three terms join the
    training logs as ``pccot/student_ce``, ``pccot/distill``, ``pccot/teacher_ce``."""

    schedules: ClassVar[tuple[str, ...]] = ("pccot",)
    config_class: ClassVar[type[MethodConfig]] = PCCoTConfig
    logged_terms: ClassVar[tuple[str, ...]] = ("student_ce", "distill", "teacher_ce")
    config: PCCoTConfig

    def attach_modules(self, model: Any, seed: int) -> None:
        if not self.config.use_projection or projection_of(model) is not None:
            return
        lm = causal_lm_of(model)
        hidden = lm.get_input_embeddings().weight.shape[-1]
        with torch.random.fork_rng(devices=[]):  # the same projection for the same seed, whatever ran before
            torch.manual_seed(seed)
            projection = LatentProjection(hidden, hidden, dropout=0.0, layer_norm=True)
            projection.apply(lm._init_weights)  # as its post_init draws the model's own layers
        attach_projection(model, projection)

    def extra_batch(self, examples: Sequence[Mapping[str, Any]]) -> dict[str, torch.Tensor]:
        """The teacher half, the CoT without its last step (:func:`~hf_icot.methods.latent_batches.teacher_batch`)."""
        return teacher_batch(self.renderer, examples)

    def loss(self, lm: Any, latent_id: int, **batch: Any) -> LatentOutput:
        return pccot_loss(
            lm, latent_id=latent_id, iterations=self.schedule.num_iterations, config=self.config, **batch
        )

    def save_files(self, model: Any, folder: str) -> None:
        save_projection(model, folder)

    def load_files(self, model: Any, folder: str) -> None:
        load_projection(folder, model)
