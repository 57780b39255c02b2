"""What each continuous thought says: SIM-CoT's auxiliary decoder (:mod:`hf_icot.methods.simcot`) reads a question's
thoughts, group by group as it was trained to, and writes greedily until ``<eos>`` — the interpretability SIM-CoT's
users came for. The model answers without it; only this reads it.

    python -m hf_icot.methods.simcot_decoding RUN_FOLDER "a b b a a b" ["another question" ...] [--thoughts N]

prints, per question, one line per thought group. From Python: :func:`load_simcot_run` (a run folder or Hub repo with
its ``simcot_decoder/``), then :func:`decode_thoughts`; a model still in memory after training takes its method's
``supervision.settings(...)``.

Coconut's visualisation samples its decoder at temperature 0.98; here decoding is greedy, so the same question reads
the same way every time.
"""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

import torch

from hf_icot.data.encoding import encode_prompt
from hf_icot.methods.latent_batches import LatentRenderer
from hf_icot.methods.latent_forward import causal_lm_of, latent_hidden_states, projection_of
from hf_icot.methods.simcot import DECODER_ATTRIBUTE, StepRule, StepSupervision, load_decoder


def load_simcot_run(name_or_path: str, **from_pretrained: Any) -> tuple[Any, Any, dict[str, Any]]:
    """The model and tokenizer of a SIM-CoT run (:func:`hf_icot.methods.load_latent_model`) with its decoder attached,
    and the decoder's settings.

    Raises:
        ValueError: a folder that does not exist, or a run without a ``simcot_decoder/`` folder (trained without
            ``simcot``).
    """
    import os

    from hf_icot.locations import names_a_missing_folder
    from hf_icot.methods import load_latent_model

    if names_a_missing_folder(name_or_path):
        raise ValueError(f"{name_or_path!r} is not a folder; give the output_dir of a run trained with simcot true.")
    model, tokenizer = load_latent_model(name_or_path, **from_pretrained)
    folder = name_or_path
    if not os.path.isdir(name_or_path):  # a Hub repo: its decoder folder only
        from huggingface_hub import snapshot_download

        revision = from_pretrained.get("revision")
        folder = snapshot_download(name_or_path, allow_patterns=["simcot_decoder/*"], revision=revision)
    loaded = load_decoder(folder, model)
    if loaded is None:
        raise ValueError(f"{name_or_path} has no simcot_decoder/; decode thoughts of a run trained with simcot true.")
    return model, tokenizer, loaded[1]


def decode_thoughts(
    model: Any,
    tokenizer: Any,
    questions: Sequence[str],
    settings: Mapping[str, Any],
    latent_thoughts: int | None = None,
    max_new_tokens: int = 32,
) -> list[list[str]]:
    """Per question, what each of its thought groups says (the decoder's greedy text, ``<eos>`` left out).

    Args:
        model: the causal LM with SIM-CoT's decoder attached (and CODI's projection where it has one).
        settings: the decoder's ``simcot.json`` (:meth:`~hf_icot.methods.simcot.StepSupervision.settings`).
        latent_thoughts: latent slots per question (default: the run's, ``settings["latent_thoughts"]``).
        max_new_tokens: at most this many tokens per group.

    Raises:
        ValueError: a model without the decoder, no questions, a non-positive ``max_new_tokens`` or
            ``latent_thoughts``, or a question the tokenizer cannot write.
    """
    lm = causal_lm_of(model)
    decoder = getattr(lm, DECODER_ATTRIBUTE, None)
    if decoder is None:
        raise ValueError("the model has no SIM-CoT decoder; load the run with load_simcot_run.")
    n = settings["latent_thoughts"] if latent_thoughts is None else latent_thoughts
    for what, value in (("max_new_tokens", max_new_tokens), ("latent_thoughts", n)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{what} {value!r} is not allowed; it must be an integer >= 1.")
    if not questions:
        raise ValueError("decode_thoughts got no questions; pass at least one.")
    rule = StepRule(**{field.name: settings[field.name] for field in dataclasses.fields(StepRule)})
    renderer = LatentRenderer(tokenizer)
    reader = StepSupervision(renderer, tokenizer, rule, prompt=settings.get("prompt"))
    was_training = model.training
    model.eval()
    try:
        with torch.inference_mode():
            return [_read(lm, decoder, reader, question, n, max_new_tokens) for question in questions]
    finally:
        model.train(was_training)


def _read(lm: Any, decoder: Any, reader: StepSupervision, question: str, n: int, max_new_tokens: int) -> list[str]:
    tokens, rule = reader.renderer.tokens, reader.rule
    prompt = encode_prompt(question, reader.tokenizer, mode="explicit") + [tokens.start]
    device = lm.get_input_embeddings().weight.device
    ids = torch.tensor([[*prompt, *[tokens.latent] * n, tokens.end]], device=device)  # (1, T)
    positions = torch.arange(ids.shape[1], device=device)[None]
    states = latent_hidden_states(lm, ids, torch.ones_like(ids), positions, tokens.latent, projection_of(lm))
    first = len(prompt)  # the first latent slot
    thoughts = list(states.embeds[0, first : first + n])  # each (H,): the thought fed at its slot
    if rule.after_last:
        projection = projection_of(lm)
        last = states.hidden[0, first + n - 1]
        thoughts.append(projection(last) if projection is not None else last)
    embed, texts = lm.get_input_embeddings(), []
    for group, start in enumerate(range(0, len(thoughts), rule.thoughts_per_step)):
        prefix = torch.cat(
            [embed(torch.tensor(reader.prompt_ids(group), dtype=torch.long, device=device)),
             torch.stack(thoughts[start : start + rule.thoughts_per_step])]
        )  # fmt: skip
        written: list[int] = []
        for _ in range(max_new_tokens):  # a few short texts: the whole prefix again for every token
            inputs = torch.cat([prefix, embed(torch.tensor(written, dtype=torch.long, device=device))])[None]
            at = torch.arange(inputs.shape[1], device=device)[None] + rule.first_position
            hidden = decoder.get_decoder()(inputs_embeds=inputs, position_ids=at).last_hidden_state[0, -1]
            token = int(decoder.get_output_embeddings()(hidden).argmax())
            if token == reader.renderer.eos:
                break
            written.append(token)
        texts.append(reader.tokenizer.decode(written))
    return texts


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Print what each continuous thought of a SIM-CoT run says.")
    parser.add_argument("run", help="a run folder (or Hub repo) trained with simcot true")
    parser.add_argument("questions", nargs="+", help="questions, as the run's data writes them")
    parser.add_argument("--thoughts", type=int, default=None, help="latent slots per question (default: the run's)")
    parser.add_argument("--max_new_tokens", type=int, default=32, help="at most this many tokens per thought group")
    args = parser.parse_args(argv)
    try:
        model, tokenizer, settings = load_simcot_run(args.run)
        read = decode_thoughts(model, tokenizer, args.questions, settings, args.thoughts, args.max_new_tokens)
    except ValueError as error:
        parser.exit(2, f"error: {error}\n")
    for question, texts in zip(args.questions, read):
        print(question)
        for group, text in enumerate(texts, start=1):
            print(f"  thought {group}: {text}")


if __name__ == "__main__":
    main()
