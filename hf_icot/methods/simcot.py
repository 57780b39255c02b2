"""SIM-CoT (Wei et al., ICLR 2026, "SIM-CoT: Supervised Implicit Chain-of-Thought", arXiv:2509.20317,
``InternLM/SIM-CoT``): step-level supervision for continuous thoughts, an option of every latent method
(``--simcot true`` with ``--schedule coconut`` or ``codi``).

While the model trains, an auxiliary decoder reads each continuous thought and is trained to write the reasoning step
that thought stands for; its cross entropy, times ``simcot_loss_factor``, joins the method's loss and is logged as
``simcot/step_ce``. The decoder is used by nothing else: ``model.safetensors`` never holds it and latent generation
never runs it, so answering costs what it costs without SIM-CoT. It is saved beside every saved model and checkpoint
(``simcot_decoder/``), so a run resumes exactly and :func:`~hf_icot.methods.simcot_decoding.decode_thoughts` can read
what each thought says.

**The decoder.** Both of its code paths load a second copy of a pretrained model (Coconut's ``run.py`` from its
``model_id``, the pretrained GPT-2 and not the Coconut checkpoint; CODI's ``src/model.py`` from the student's own
``model_name_or_path``, without the student's LoRA), and train all of its weights, at the run's learning rate, also
when the student has LoRA. Here it is a copy of the model as training starts (its weights without LoRA), or the model
named by ``simcot_decoder`` (the same width). Its input is read through the *student's* token embeddings (both codes:
``self.embedding`` / ``get_embd(self.codi)``), its logits come from its own output layer; its own input embedding
table is never read (frozen where it is not tied to that output layer, as an unused weight stays under AdamW).

**Its input and target, per host method** (:class:`StepRule`, given by each method):

================================ =========================================== ========================================
                                 Coconut (``Coconut/coconut.py``,             CODI (``CODI/src/model.py``,
                                 ``CoconutGPT_Same_Word_Embedding``)          ``use_decoder``)
================================ =========================================== ========================================
one decoder input                the ``c_thought`` thoughts of one step       one thought; the ``num_latent`` fed ones
                                                                              and the state after the last slot
                                                                              (through the projection): ``n + 1``
the steps supervised             those the plan replaced                      the teacher's (without the last step)
group ``k`` writes               step ``k``; the last group of an example     the same
                                 every step left
a group with no step left        writes the answer (``#### answer``)          writes nothing
decoder positions                from 1                                       from 0
reduction                        per group: each row's summed token CE,       per group: the mean token CE; then the
                                 averaged over rows; then the mean over       mean over the groups with a target
                                 groups
================================ =========================================== ========================================

Each target ends with ``<eos>``, labelled; the thought positions are not. With ``simcot_prompt`` (e.g. ``"Step {k} of
the solution"``) its tokens stand before the thoughts of group ``k`` (from 1), in training and in decoding alike;
neither code path trains with a prompt (Coconut's visualisation prepends one, ``w_prompt``, that its training never
showed), so the default is none.

Where their code and this toolkit differ, these choices are ours:

* a step is one entry of the data's ``cot`` list; their code cuts GSM8K's CoT into ``<<…>>`` spans (Coconut in the
  replaced steps, CODI in the teacher's ids). The steps a last group writes together are the CoT's tokens as the
  sequence writes them; Coconut's code puts its step separator ``"\\n"`` between them, CODI's concatenates them.
* Coconut's released ``run.py`` never hands its decoder a target: it builds the plain Coconut dataset and collator
  (``get_cot_with_explainable_latent_dataset`` and ``MyExplainableCollator`` are imported, not used), so its
  ``args/gsm_simcot.yaml`` trains Coconut beside an idle decoder. Here the step loss is what its forward computes when
  given those targets (``bench/latent_vs_public/run.py`` compares the two on the same weights and batches).
* Coconut's wrapper sets only the base model's training mode, so its decoder runs without dropout; here the decoder
  follows the trainer's mode, as CODI's does.
* Coconut's code reads the number of thoughts from a batch's first row and divides by zero at stage 0; here each row
  has its own groups, and a batch without a thought adds no term (nothing is logged for it).
* CODI's code cuts, at every thought, each row's target to the length of the batch's first row's (plus one):
  its ``dedup_trailing_pads`` runs inside its loop over the rows, so a later row keeps only as many tokens as the
  first row's target has (one, when the first row has none there). Here every target is written whole; the two agree
  when the first row's targets are the longest (``bench/latent_vs_public/simcot.py`` shows both cases).
* CODI's code runs its decoder under bfloat16 autocast; here it runs in the model's dtype (``--bf16`` autocasts it).
  Its ``decoder_path`` with projections between widths is not supported: a decoder of another width is refused.
"""

from __future__ import annotations

import copy
import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import torch
from torch import nn

from hf_icot.curriculum.base import check_at_least, option
from hf_icot.data.encoding import IGNORE_INDEX, encode_text
from hf_icot.methods.base import MethodConfig
from hf_icot.methods.latent_batches import LatentRenderer, step_token_counts
from hf_icot.methods.latent_forward import (
    PROJECTION_ATTRIBUTE,
    LatentStates,
    causal_lm_of,
    check_latent_model,
    projection_of,
)
from hf_icot.modeling.labelled_logits import labelled_targets, predicting_positions

DECODER_ATTRIBUTE = "simcot_decoder"
DECODER_FOLDER = "simcot_decoder"
SETTINGS_FILE = "simcot.json"
LOG_NAME = "simcot/step_ce"
#: The batch keys of the decoder's inputs, each ``(B, G, …)``: row, thought group, then the group's own axis.
BATCH_KEYS = ("input_ids", "attention_mask", "labels", "slots", "columns", "after_last")


@dataclass
class SIMCoTConfig(MethodConfig):
    """SIM-CoT's options, which every continuous-thought method's config carries (see the module docstring)."""

    simcot: bool = option(
        False,
        "Add SIM-CoT's step supervision: an auxiliary decoder, dropped at inference, reads each continuous thought "
        "and learns to write the reasoning step it stands for.",
    )
    simcot_loss_factor: float = option(1.0, "Weight of SIM-CoT's step loss (1.0 in both of its code paths).")
    simcot_decoder: str | None = option(
        None,
        "The model SIM-CoT's decoder starts from (a folder or Hub id of the same width; its Coconut path loads the "
        "pretrained model); unset: a copy of the model as training starts (its CODI path).",
    )
    simcot_prompt: str | None = option(
        None,
        "Text the decoder reads before each group of thoughts, {k} its number from 1 (e.g. 'Step {k} of the "
        "solution'); unset: none, as SIM-CoT trains.",
    )

    def __post_init__(self) -> None:
        check_at_least("simcot_loss_factor", self.simcot_loss_factor, 0)
        for name in ("simcot_decoder", "simcot_prompt"):
            value = getattr(self, name)
            if value is not None and not self.simcot:
                raise ValueError(
                    f"{name} {value!r} is set but simcot is off; pass simcot true, or leave {name} unset."
                )
        if self.simcot_prompt is not None and not self.simcot_prompt.strip():
            raise ValueError(
                f"simcot_prompt {self.simcot_prompt!r} is not allowed; give some text (e.g. 'Step {{k}}'), or leave it "
                "unset."
            )


@dataclass(frozen=True)
class StepRule:
    """How a method's thoughts meet the decoder (the table of the module docstring)."""

    #: Thoughts the decoder reads at once: Coconut's ``c_thought``, CODI's 1.
    thoughts_per_step: int = 1
    #: Also supervise the state after the last latent slot, through the projection (CODI's ``n + 1``-th thought).
    after_last: bool = False
    #: A group with no step left writes the answer (Coconut); else it writes nothing (CODI).
    answer_when_no_step: bool = False
    #: The decoder's first position id (Coconut's code counts from 1).
    first_position: int = 0
    #: Each row's token cross entropy summed, then averaged over rows (Coconut); else averaged over tokens (CODI).
    per_row_sum: bool = False


# -- the decoder on the model ---------------------------------------------------------------------------------------


def decoder_of(model: nn.Module) -> nn.Module | None:
    """The decoder :func:`attach_decoder` hung on ``model``, or None."""
    return getattr(causal_lm_of(model), DECODER_ATTRIBUTE, None)


def plain_weights(lm: nn.Module) -> dict[str, torch.Tensor]:
    """``lm``'s own weights under their plain names: without LoRA's (a fresh adapter adds nothing), the attached
    modules' or the decoder's."""
    state = {}
    for name, tensor in lm.state_dict().items():
        if name.split(".")[0] in (DECODER_ATTRIBUTE, PROJECTION_ATTRIBUTE) or ".lora_" in name:
            continue
        state[name.replace(".base_layer.", ".")] = tensor
    return state


def build_decoder(model: nn.Module, source: str | None = None) -> nn.Module:
    """SIM-CoT's decoder for ``model``: a copy of its weights (LoRA left out), or the causal LM at ``source``; in the
    model's dtype, drawing nothing from the global random state.

    Raises:
        ValueError: ``source``'s hidden size differs from the model's, or it cannot read continuous thoughts.
    """
    lm = causal_lm_of(model)
    weight = lm.get_input_embeddings().weight
    with torch.random.fork_rng(devices=[]):
        if source is None:
            decoder = type(lm)(copy.deepcopy(lm.config))
            decoder.load_state_dict(plain_weights(lm))
        else:
            from transformers import AutoModelForCausalLM

            decoder = AutoModelForCausalLM.from_pretrained(source)
    width = decoder.get_input_embeddings().weight.shape[-1]
    if width != weight.shape[-1]:
        raise ValueError(
            f"simcot_decoder {source!r} is {width} wide but the model's hidden states are {weight.shape[-1]}; give a "
            "model of the same width, or leave simcot_decoder unset (a copy of the model)."
        )
    check_latent_model(decoder)
    return decoder.to(device=weight.device, dtype=weight.dtype)


def attach_decoder(model: nn.Module, decoder: nn.Module) -> None:
    """Hang ``decoder`` on the causal LM inside ``model`` (trained and wrapped with it, out of its
    ``model.safetensors``); its input embedding table, never read, is frozen unless tied to its output layer."""
    lm = causal_lm_of(model)
    embeddings, head = decoder.get_input_embeddings().weight, decoder.get_output_embeddings().weight
    if embeddings is not head:
        embeddings.requires_grad_(False)
    lm.add_module(DECODER_ATTRIBUTE, decoder.train(lm.training))
    keys = {f"{DECODER_ATTRIBUTE}.{name}" for name in decoder.state_dict()}
    lm._keys_to_ignore_on_save = set(lm._keys_to_ignore_on_save or ()) | keys


def save_decoder(model: nn.Module, folder: str, settings: Mapping[str, Any]) -> bool:
    """Write ``model``'s decoder into ``folder/simcot_decoder/`` (a causal LM folder, and ``simcot.json``: its
    ``settings``); False if it has none."""
    decoder = decoder_of(model)
    if decoder is None:
        return False
    path = os.path.join(folder, DECODER_FOLDER)
    decoder.save_pretrained(path)
    with open(os.path.join(path, SETTINGS_FILE), "w", encoding="utf-8") as stream:
        json.dump(dict(settings), stream, indent=2, sort_keys=True)
    return True


def load_decoder(folder: str, model: nn.Module | None = None) -> tuple[nn.Module, dict[str, Any]] | None:
    """The decoder saved in ``folder`` and its settings (None if there is none), attached to ``model`` when given (its
    weights replacing an attached one's).

    Raises:
        ValueError: a decoder folder without its settings.
    """
    from transformers import AutoModelForCausalLM

    path = os.path.join(folder, DECODER_FOLDER)
    if not os.path.isdir(path):
        return None
    if not os.path.isfile(os.path.join(path, SETTINGS_FILE)):
        raise ValueError(f"{path} has no {SETTINGS_FILE}; save the decoder with save_decoder.")
    with open(os.path.join(path, SETTINGS_FILE), encoding="utf-8") as stream:
        settings = json.load(stream)
    saved = AutoModelForCausalLM.from_pretrained(path)
    if model is None:
        return saved, settings
    attached = decoder_of(model)
    if attached is None:
        weight = causal_lm_of(model).get_input_embeddings().weight
        attach_decoder(model, saved.to(device=weight.device, dtype=weight.dtype))
        return saved, settings
    attached.load_state_dict(saved.state_dict())
    return attached, settings


# -- batches and loss ----------------------------------------------------------------------------------------------


class StepSupervision:
    """SIM-CoT's batches and loss for one method's runs (its :class:`StepRule`), the decoder hanging on the model.

    Args:
        renderer: the method's latent renderer (markers, ``<eos>``, padding).
        tokenizer: encodes ``prompt``.
        rule: the host method's :class:`StepRule`.
        factor: the loss weight.
        prompt: text before each group's thoughts, ``{k}`` its number from 1; None: none.
        vocab_size: the decoder's output size (a target beyond it is refused).
    """

    def __init__(
        self,
        renderer: LatentRenderer,
        tokenizer: Any,
        rule: StepRule,
        factor: float = 1.0,
        prompt: str | None = None,
        vocab_size: int | None = None,
    ) -> None:
        self.renderer, self.tokenizer, self.rule, self.factor, self.prompt = renderer, tokenizer, rule, factor, prompt
        self.vocab_size = vocab_size
        self._prompts: dict[int, list[int]] = {}

    def settings(self, latent_thoughts: int) -> dict[str, Any]:
        """What decoding a thought needs besides the weights (``simcot.json``)."""
        return {**asdict(self.rule), "prompt": self.prompt, "latent_thoughts": latent_thoughts}

    def prompt_ids(self, group: int) -> list[int]:
        """The prompt tokens before group ``group`` (0-based; none without a prompt)."""
        if self.prompt is None:
            return []
        if group not in self._prompts:
            self._prompts[group] = encode_text(self.prompt.replace("{k}", str(group + 1)), self.tokenizer)
        return self._prompts[group]

    def targets(self, example: Mapping[str, Any], n_groups: int, n_steps: int) -> list[list[int] | None]:
        """What each of an example's ``n_groups`` thought groups writes, ``<eos>`` not included, when its thoughts
        stand for its first ``n_steps`` CoT steps (None: nothing)."""
        ends = [0]
        for count in step_token_counts(example)[:n_steps]:
            ends.append(ends[-1] + count)
        cot, out = list(example["cot_ids"]), []
        for group in range(n_groups):
            if group < n_steps:  # the last group writes every step left
                out.append(cot[ends[group] : ends[n_steps if group == n_groups - 1 else group + 1]])
            else:
                out.append(list(example["answer_ids"]) if self.rule.answer_when_no_step else None)
        return out

    def batch(
        self,
        examples: Sequence[Mapping[str, Any]],
        n_latent: Sequence[int],
        n_steps: Sequence[int],
        input_ids: torch.Tensor,
    ) -> dict[str, torch.Tensor]:
        """The decoder's inputs for a rendered latent batch (``input_ids``, rows aligned on ``<|start-latent|>``):
        per row and thought group, ``simcot_input_ids`` (prompt, a slot per thought, target, ``<eos>``; right-padded),
        ``attention_mask``, ``labels``, ``slots`` (where thoughts go), ``columns`` (each thought's column in the latent
        sequence) and ``after_last`` (the state after the last slot: read at ``column - 1``, projected). Empty when no
        group writes anything.

        Raises:
            ValueError: a target token the decoder's vocabulary lacks.
        """
        c, eos = self.rule.thoughts_per_step, self.renderer.eos
        start = int((input_ids[0] == self.renderer.tokens.start).nonzero()[0])
        items: dict[tuple[int, int], tuple[list[int], list[int], list[int], list[bool], int]] = {}
        for row, (example, n, m) in enumerate(zip(examples, n_latent, n_steps)):
            thoughts = n + 1 if self.rule.after_last else n
            n_groups = -(-thoughts // c)
            for group, target in enumerate(self.targets(example, n_groups, m)):
                if target is None:
                    continue
                if self.vocab_size is not None and max(target + [eos]) >= self.vocab_size:
                    raise ValueError(
                        f"a SIM-CoT target holds token {max(target + [eos])}, which the decoder's vocabulary of "
                        f"{self.vocab_size} lacks; give simcot_decoder a model with the run's tokenizer."
                    )
                taken = range(group * c, min((group + 1) * c, thoughts))
                prompt = self.prompt_ids(group)
                ids = [*prompt, *[self.renderer.pad] * len(taken), *target, eos]
                labels = [IGNORE_INDEX] * (len(prompt) + len(taken)) + [*target, eos]
                items[row, group] = (ids, labels, [start + 1 + t for t in taken], [t == n for t in taken], len(prompt))
        if not items:
            return {}
        n_groups = 1 + max(group for _, group in items)
        width = max(len(ids) for ids, *_ in items.values())
        shape = (len(examples), n_groups)
        out = {
            "input_ids": torch.full((*shape, width), self.renderer.pad, dtype=torch.long),
            "attention_mask": torch.zeros((*shape, width), dtype=torch.long),
            "labels": torch.full((*shape, width), IGNORE_INDEX, dtype=torch.long),
            "slots": torch.zeros((*shape, width), dtype=torch.bool),
            "columns": torch.full((*shape, c), -1, dtype=torch.long),
            "after_last": torch.zeros((*shape, c), dtype=torch.bool),
        }
        for (row, group), (ids, labels, columns, after, first) in items.items():
            out["input_ids"][row, group, : len(ids)] = torch.tensor(ids)
            out["attention_mask"][row, group, : len(ids)] = 1
            out["labels"][row, group, : len(ids)] = torch.tensor(labels)
            out["slots"][row, group, first : first + len(columns)] = True
            out["columns"][row, group, : len(columns)] = torch.tensor(columns)
            out["after_last"][row, group, : len(after)] = torch.tensor(after)
        return {f"simcot_{key}": out[key] for key in BATCH_KEYS}

    def loss(self, lm: nn.Module, states: LatentStates, batch: Mapping[str, Any]) -> torch.Tensor | None:
        """The step loss of a micro-batch (:meth:`batch`'s keys), from the thoughts the latent forward fed (``states``);
        None when the batch supervises no thought."""
        if "simcot_labels" not in batch:
            return None
        n_rows, n_groups = batch["simcot_labels"].shape[:2]
        device = batch["simcot_labels"].device
        rows = torch.arange(n_rows, device=device).repeat_interleave(n_groups)
        groups = torch.arange(n_groups, device=device).repeat(n_rows)
        keep = (batch["simcot_labels"].flatten(0, 1) != IGNORE_INDEX).any(-1)  # the (row, group) items with a target
        rows, groups = rows[keep], groups[keep]
        ids, mask, labels, slots, columns, after = (batch[f"simcot_{key}"].flatten(0, 1)[keep] for key in BATCH_KEYS)
        item, k = (columns >= 0).nonzero(as_tuple=True)  # every thought an item reads, in slot order
        row, column = rows[item], columns[item, k]
        thoughts = states.embeds[row, column]  # (M, H): the input embedding the thought was fed as
        last = after[item, k].nonzero().flatten()
        if last.numel():  # the state after the last slot was fed nowhere: through the projection here
            state = states.hidden[row[last], column[last] - 1]
            projection = projection_of(lm)
            state = projection(state) if projection is not None else state
            thoughts = thoughts.index_put((last,), state.to(thoughts.dtype))
        embeds = lm.get_input_embeddings()(ids)  # (N, L, H): the student's token embeddings
        embeds = embeds.index_put(slots.nonzero(as_tuple=True), thoughts.to(embeds.dtype))
        positions = torch.arange(ids.shape[1], device=ids.device) + self.rule.first_position
        decoder = getattr(lm, DECODER_ATTRIBUTE)
        hidden = decoder.get_decoder()(
            inputs_embeds=embeds, attention_mask=mask, position_ids=positions.expand_as(ids)
        ).last_hidden_state
        at = predicting_positions(labels)
        logits = decoder.get_output_embeddings()(hidden[at])  # (K, V): only where a target token is predicted
        tokens = torch.nn.functional.cross_entropy(logits.float(), labelled_targets(labels, at), reduction="none")
        token_item = at.nonzero()[:, 0]
        if self.rule.per_row_sum:
            per_item = tokens.new_zeros(len(ids)).index_add(0, token_item, tokens)
            sums = tokens.new_zeros(n_groups).index_add(0, groups, per_item)
            counts = torch.bincount(groups, minlength=n_groups)
        else:
            sums = tokens.new_zeros(n_groups).index_add(0, groups[token_item], tokens)
            counts = torch.bincount(groups[token_item], minlength=n_groups)
        present = counts > 0
        return (sums[present] / counts[present]).mean()

    def add_to(self, output: Any, lm: nn.Module, states: LatentStates, batch: Mapping[str, Any]) -> Any:
        """``output`` (a :class:`~hf_icot.methods.latent.LatentOutput`) with the weighted step loss added and the
        unweighted one as ``step_ce``."""
        step = self.loss(lm, states, batch)
        if step is not None:
            output.loss = output.loss + self.factor * step
            output.step_ce = step.detach()
        return output


def supervision_for(
    model: nn.Module, tokenizer: Any, renderer: LatentRenderer, rule: StepRule, config: SIMCoTConfig
) -> StepSupervision:
    """Ready ``model`` for SIM-CoT (its decoder built and attached unless it has one) and its :class:`StepSupervision`.

    Raises:
        ValueError: what :func:`build_decoder` refuses.
    """
    supervision = StepSupervision(renderer, tokenizer, rule, config.simcot_loss_factor, config.simcot_prompt)
    supervision.prompt_ids(0)  # a prompt the tokenizer cannot write is refused before anything is built
    decoder = decoder_of(model)
    if decoder is None:
        decoder = build_decoder(model, config.simcot_decoder)
        attach_decoder(model, decoder)
    supervision.vocab_size = decoder.get_output_embeddings().weight.shape[0]
    return supervision
