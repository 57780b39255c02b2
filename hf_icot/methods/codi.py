"""CODI (Shen et al. 2025, "Compressing Chain-of-Thought into Continuous Space via Self-Distillation",
``zhenyi4/codi``, its ``src/model.py``): one model trained at once as a CoT teacher and a latent student.

Every example is rendered twice: the student sequence (question, ``num_latent`` continuous thoughts, answer; the plan of
:class:`hf_icot.curriculum.latent.CODI`) and the teacher sequence ``question <eos> cot <eos> #### answer <eos>``
(without its last CoT step unless ``include_last_cot``), labelled after the first ``<eos>``. The loss is
``student_ce + distill_loss_factor × distill + ref_loss_factor × teacher_ce``; the distillation compares, at the token
before the answer, the student's hidden states of every layer (embeddings first) with the teacher's, detached: smooth
L1 or MSE averaged over the batch and hidden size, per layer optionally divided by the teacher's std there (twice for
l2, as CODI does), then averaged over the layers. CODI runs its teacher twice, once without gradient for the targets
and once with it for the cross entropy; here one pass serves both (the targets detached), which is the same
computation whenever dropout is off, and with dropout shares one mask.

Each fed-back thought optionally goes through CODI's projection (``use_prj``:
:class:`~hf_icot.methods.latent_forward.LatentProjection`), drawn from the run's seed, saved beside every model and
checkpoint as ``latent_projection.safetensors`` and read back on resume.

**Text format** (the plan's ``latent_format`` and ``remove_eos``, :mod:`hf_icot.data.latent_formats`): ``codi`` gives
the token ids of CODI's ``train.py`` on GSM8K-Aug — student ``question [<eos>] <bot> thoughts <eot> [<eos>] The answer
is: answer <eos>``, teacher ``question [<eos>] CoT [<eos>] The answer is: answer <eos>``, the bracketed ``<eos>``
gone under ``remove_eos`` — with its ``bot`` / ``eot`` (ids it appends past the vocabulary) as our
``<|start-latent|>`` / ``<|end-latent|>`` and each thought a ``<|latent|>`` slot; the labels are theirs (the student's
from the token after ``<eot>``, the teacher's after the question's separator) and distillation sits at their positions
(:meth:`~hf_icot.data.latent_formats.LatentFormat.answer_offset`). The teacher's CoT (its steps but the last, joined
by spaces and tokenized as one text) is computed once per dataset (:meth:`CODIMethod.prepare_dataset`). What still
differs, and why: CODI drops from training the rows whose answer does not start with a digit and those over
``max_token_num`` (1000) tokens — data selection, which ``latent_json`` leaves to the user; it splits GSM8K-Aug's CoT
at spaces and drops the last chunk where we drop the last :func:`hf_icot.cot.split_steps` step (the same on CoTs of
``<<…>>`` chunks); its GSM8K-Aug-NL, ProntoQA and CommonsenseQA branches are not reproduced. Its batches carry no
attention mask after the question and no position ids, so a left-padded question is attended to and counted from
the first column; ours mask padding and count each row from its first token (``--fix_attn_mask`` in CODI masks it
too). Its ``test.py`` generates with a batch of at least 2 (its greedy step squeezes a batch of 1 away); ours takes
any. The default format ``hf_icot`` is this toolkit's: ``####`` for "The answer is:" (distilled at its last token),
``<eos>`` separators, the teacher ``question <eos> cot <eos> #### answer <eos>``.

With ``simcot`` (:mod:`hf_icot.methods.simcot`) an auxiliary decoder learns to write the teacher's steps, one per
thought, from every fed thought and the state after the last slot, as SIM-CoT's CODI path does
(:meth:`CODIMethod.step_rule`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import torch

from hf_icot.curriculum.base import check_at_least, option
from hf_icot.curriculum.layout import check_choice
from hf_icot.data.latent_formats import LatentFormat
from hf_icot.methods.base import MethodConfig
from hf_icot.methods.latent import LatentMethod, LatentOutput, labelled_cross_entropy, states_at
from hf_icot.methods.latent_batches import TEACHER_COT, teacher_batch
from hf_icot.methods.latent_forward import (
    LatentProjection,
    attach_projection,
    causal_lm_of,
    latent_hidden_states,
    load_projection,
    projection_of,
    save_projection,
)
from hf_icot.methods.simcot import SIMCoTConfig, StepRule, StepSupervision

DISTILL_LOSSES = ("smooth_l1", "l2")
#: The column :meth:`CODIMethod.prepare_dataset` adds in CODI's format: each teacher CoT's ids.
#: The keys of the teacher half of a batch (the student half has the usual ``input_ids``, ``labels``, …).
TEACHER_KEYS = ("teacher_input_ids", "teacher_attention_mask", "teacher_labels", "teacher_answer_positions")


@dataclass
class CODIConfig(SIMCoTConfig):
    """CODI's options, named as its ``TrainingArguments`` names them (their defaults are its dataclass's), and
    SIM-CoT's, which every latent method takes."""

    use_prj: bool = option(
        False,
        "Pass each thought through a projection (Dropout, Linear, GELU, Linear, LayerNorm) before feeding it.",
    )
    prj_dim: int | None = option(None, "The projection's hidden width (unset: the model's hidden size).")
    prj_dropout: float = option(0.0, "The projection's dropout.")
    prj_no_ln: bool = option(False, "Leave the LayerNorm out of the projection.")
    distill_loss_type: str = option("smooth_l1", "The distillation loss, smooth_l1 or l2.", choices=DISTILL_LOSSES)
    distill_loss_factor: float = option(1.0, "Weight of the distillation loss.")
    distill_loss_div_std: bool = option(False, "Divide the distillation loss by the teacher's std (l2: twice).")
    ref_loss_factor: float = option(1.0, "Weight of the teacher's cross entropy.")
    include_last_cot: bool = option(False, "Keep the last CoT step in the teacher's CoT (CODI drops it).")
    cot_sentences: bool = option(
        False,
        "The teacher's CoT as CODI's GSM8k-Aug-NL branch (its data_name icot-full) writes it: the kept steps are "
        "sentences (latent_json format codi_nl), joined by '. ' and closed by '.\\n'; off: joined by spaces, as its "
        "GSM8k-Aug branch. Needs latent_format codi.",
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        check_at_least("prj_dim", self.prj_dim, 1)
        if not 0.0 <= self.prj_dropout < 1.0:
            raise ValueError(f"prj_dropout {self.prj_dropout} is not allowed; it must be in [0, 1).")
        check_choice("distill_loss_type", self.distill_loss_type, DISTILL_LOSSES)
        check_at_least("distill_loss_factor", self.distill_loss_factor, 0)
        check_at_least("ref_loss_factor", self.ref_loss_factor, 0)

    def teacher_steps(self, n_steps: int) -> int:
        """How many of an example's ``n_steps`` CoT steps the teacher sequence keeps (CODI drops the last)."""
        return n_steps if self.include_last_cot else max(n_steps - 1, 0)


def codi_loss(
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
    config: CODIConfig,
    supervision: StepSupervision | None = None,
    **unused: Any,
) -> LatentOutput:
    """CODI's loss on one micro-batch (student half, teacher half: :data:`TEACHER_KEYS`), its three terms beside it;
    with ``supervision``, plus SIM-CoT's step loss (read from the batch's ``simcot_*`` keys)."""
    teacher = lm.get_decoder()(
        input_ids=teacher_input_ids, attention_mask=teacher_attention_mask, output_hidden_states=True
    )
    teacher_ce = labelled_cross_entropy(lm, teacher.last_hidden_state, teacher_labels)
    states = latent_hidden_states(
        lm, input_ids, attention_mask, position_ids, latent_id, projection_of(lm), all_layers=True
    )
    hidden, layers = states.hidden, states.layers
    student_ce = labelled_cross_entropy(lm, hidden, labels)
    # The last pass starts at the last latent column (or at 0 without latent slots): its states are indexed from there.
    first = hidden.shape[1] - layers[0].shape[1]
    l2 = config.distill_loss_type == "l2"
    distill_fn = torch.nn.functional.mse_loss if l2 else torch.nn.functional.smooth_l1_loss
    distill = 0.0
    for student_layer, teacher_layer in zip(layers, teacher.hidden_states):
        target = states_at(teacher_layer, teacher_answer_positions).detach()  # (B, H)
        term = distill_fn(states_at(student_layer, answer_positions - first), target)
        if config.distill_loss_div_std:
            term = term / target.std() ** (2 if l2 else 1)
        distill = distill + term
    distill = distill / len(layers)
    loss = student_ce + config.distill_loss_factor * distill + config.ref_loss_factor * teacher_ce
    output = LatentOutput(
        loss=loss, student_ce=student_ce.detach(), distill=distill.detach(), teacher_ce=teacher_ce.detach()
    )
    return supervision.add_to(output, lm, states, unused) if supervision is not None else output


class CODIMethod(LatentMethod):
    """CODI on :class:`hf_icot.training.trainer.ICoTTrainer` (see the module docstring); its three terms join the
    training logs as ``codi/student_ce``, ``codi/distill``, ``codi/teacher_ce``."""

    schedules: ClassVar[tuple[str, ...]] = ("codi",)
    config_class: ClassVar[type[MethodConfig]] = CODIConfig
    logged_terms: ClassVar[tuple[str, ...]] = ("student_ce", "distill", "teacher_ce")
    config: CODIConfig

    def __init__(self, schedule: Any, config: MethodConfig | None = None) -> None:
        super().__init__(schedule, config)
        if self.config.cot_sentences and schedule.layout.latent_format != "codi":
            raise ValueError(
                f"cot_sentences true is CODI's format's option; it applies with latent_format 'codi', not "
                f"{schedule.layout.latent_format!r}."
            )

    def attach_modules(self, model: Any, seed: int) -> None:
        if not self.config.use_prj or projection_of(model) is not None:
            return
        hidden = causal_lm_of(model).get_input_embeddings().weight.shape[-1]
        with torch.random.fork_rng(devices=[]):  # the same projection for the same seed, whatever ran before
            torch.manual_seed(seed)
            projection = LatentProjection(
                hidden, self.config.prj_dim or hidden, self.config.prj_dropout, not self.config.prj_no_ln
            )
        attach_projection(model, projection)

    def prepare_dataset(self, dataset: Any, tokenizer: Any) -> Any:
        """In CODI's format, add ``teacher_cot_ids``: each teacher CoT (its steps but the last unless
        ``include_last_cot``) joined and tokenized as CODI does (:meth:`LatentFormat.cot_ids`; ``cot_sentences``: as
        its GSM8k-Aug-NL branch), once per dataset."""
        layout = self.schedule.layout
        if layout.latent_format != "codi" or TEACHER_COT in dataset.column_names:
            return dataset
        fmt = LatentFormat.of(tokenizer, layout)

        def teacher_cots(batch: dict[str, list]) -> dict[str, list]:
            kept = [cot[: self.config.teacher_steps(len(cot))] for cot in batch["cot"]]
            return {TEACHER_COT: fmt.cot_ids(kept, sentences=self.config.cot_sentences)}

        return dataset.map(teacher_cots, batched=True, desc="hf_icot: CODI's teacher CoTs")

    def extra_batch(self, examples: Sequence[Mapping[str, Any]]) -> dict[str, torch.Tensor]:
        """The teacher half (:func:`~hf_icot.methods.latent_batches.teacher_batch`, in the run's format)."""
        return teacher_batch(self.renderer, examples, self.config.include_last_cot)

    def step_rule(self) -> StepRule:
        """SIM-CoT's CODI path: one thought each, the state after the last slot too, no target past the teacher's
        steps, positions from 0, token-mean cross entropy."""
        return StepRule(1, after_last=True)

    def supervised_steps(self, example: Mapping[str, Any], plan: Any) -> int:
        """The teacher's steps (SIM-CoT's CODI path cuts its targets out of the teacher sequence)."""
        return self.config.teacher_steps(example["n_cot_steps"])

    def loss(self, lm: Any, latent_id: int, **batch: Any) -> LatentOutput:
        return codi_loss(lm, latent_id=latent_id, config=self.config, supervision=self.supervision, **batch)

    def save_files(self, model: Any, folder: str) -> None:
        save_projection(model, folder)
        super().save_files(model, folder)

    def load_files(self, model: Any, folder: str) -> None:
        load_projection(folder, model)
        super().load_files(model, folder)
