"""Generation equivalence: on two saved trained models, every mode the evaluation uses generates exactly the tokens
recorded from the hand-written greedy loop that ``hf_icot.evaluation.generation`` had before ``model.generate``.

The models (``generation_fixture/``, built by ``build_generation_fixture.py``) are 2-layer GPT-2s trained on counting
questions of 4 to 6 letters with a token mixture, length hints and ``keep_position``, one removing CoT tokens from the
left and one from the right. Their generations are partly right and partly wrong, and where the kept positions go
changes them (see ``test_the_recorded_outputs_depend_on_the_kept_positions``), so a generation that misplaces a
position, a stop or a padded row fails here. The same tokens come whatever the model's own ``generation_config`` says
and with ``synced_gpus``; models ``generate`` cannot serve are refused with one sentence.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, GenerationConfig

from hf_icot.evaluation.generation import generate_batched

FIXTURE = Path(__file__).resolve().parent / "generation_fixture"

#: Held-out questions (none is in the fixture's training set), lengths interleaved so that sorting the prompts by
#: length reorders them and batches of 4 mix lengths (left padding). The counting CoT has one token per letter.
QUESTIONS = [
    "a b b b a b",
    "b a b a",
    "a a a b b",
    "b b b a",
    "a b b a a a",
    "a a b b b",
    "a b a b",
    "b b b b a a",
    "b a b a a",
]


def prompt_and_shift(tokenizer, question: str, mode: str, side: str) -> tuple[list[int], tuple[int, int] | None]:
    """The prompt of ``mode`` and, for a ``keep_position`` model, ``(start, shift)``: an implicit prompt's closing
    <eos> sits where the full CoT ended; under ``hint=k`` the tokens after the removed ones (the first generated one
    for a left removal, the <eos> after the k kept for a right one) sit where they stood with the full CoT."""
    total = len(question.split())
    words = question.split() + ["<eos>"]
    if mode == "explicit":
        return tokenizer.convert_tokens_to_ids(words), None
    if mode == "implicit":
        prompt = tokenizer.convert_tokens_to_ids(words + ["<eos>"])
        return prompt, (len(prompt) - 1, total)
    kept = min(int(mode.removeprefix("hint=")), total)
    prompt = tokenizer.convert_tokens_to_ids(words + [f"<len_{mode.removeprefix('hint=')}>"])
    return prompt, (len(prompt) + (kept if side == "right" else 0), total - kept)


#: name -> (fixture side, mode, keep positions, generate_batched keyword arguments)
CASES = {
    f"{side}/{name}": (side, mode, kept, kwargs)
    for side in ("left", "right")
    for name, mode, kept, kwargs in [
        ("explicit", "explicit", False, {}),
        ("implicit", "implicit", False, {}),
        ("implicit/kept", "implicit", True, {}),
        ("hint=0/kept", "hint=0", True, {}),
        ("hint=2", "hint=2", False, {}),
        ("hint=2/kept", "hint=2", True, {}),
        ("hint=5/kept", "hint=5", True, {}),
        # One batch holding every length, and (right removal) rows whose positions jump at different tokens.
        ("hint=5/kept/one_batch", "hint=5", True, {"batch_size": 64}),
        # No stop after the answer: every row runs until the model's 32 positions are used up.
        ("implicit/kept/to_context", "implicit", True, {"max_new_tokens": 100, "stop_after_answer": False}),
    ]
}


@pytest.fixture(scope="module")
def fixture_models():
    torch.set_num_threads(1)
    return {
        side: (AutoModelForCausalLM.from_pretrained(FIXTURE / side), AutoTokenizer.from_pretrained(FIXTURE / side))
        for side in ("left", "right")
    }


def generate_case(fixture_models, name: str) -> list[str]:
    side, mode, kept, kwargs = CASES[name]
    model, tokenizer = fixture_models[side]
    prompts, shifts = zip(*(prompt_and_shift(tokenizer, question, mode, side) for question in QUESTIONS))
    kwargs = {"max_new_tokens": 16, "batch_size": 4, **kwargs}
    out = generate_batched(model, tokenizer, list(prompts), position_shifts=list(shifts) if kept else None, **kwargs)
    return [" ".join(tokenizer.convert_ids_to_tokens(ids)) for ids in out]


@pytest.mark.parametrize("name", list(CASES))
def test_generation_equals_the_recorded_greedy_loop(fixture_models, name):
    assert generate_case(fixture_models, name) == EXPECTED[name]


def test_the_recorded_outputs_depend_on_the_kept_positions():
    for side in ("left", "right"):
        assert EXPECTED[f"{side}/implicit/kept"] != EXPECTED[f"{side}/implicit"]
        assert EXPECTED[f"{side}/hint=2/kept"] != EXPECTED[f"{side}/hint=2"]
    # Stops at the third <eos> of prompt + continuation: two more after an explicit or hint prompt, one after an
    # implicit one (which holds two).
    for name in ("left/explicit", "right/hint=2/kept", "right/implicit/kept"):
        implicit = "implicit" in name
        assert all(row.endswith("<eos>") and row.count("<eos>") == 2 - implicit for row in EXPECTED[name]), name
    # Up to the context: 32 positions minus the reach (length + shift) of the batch's furthest prompt. Batches of 4,
    # sorted by length: three 4-letter prompts and a 5-letter one (reach 7 + 5), then the other two 5-letter ones and
    # two 6-letter ones (8 + 6), then the last 6-letter one.
    by_length = {4: 32 - 12, 5: 32 - 12, 6: 32 - 14}
    expected = [by_length[len(q.split())] for q in QUESTIONS]
    expected[QUESTIONS.index("a a b b b")] = expected[QUESTIONS.index("b a b a a")] = 32 - 14  # in the second batch
    assert [len(row.split()) for row in EXPECTED["left/implicit/kept/to_context"]] == expected


def test_the_models_own_generation_config_does_not_change_decoding(fixture_models):
    model, tokenizer = fixture_models["right"]
    own = model.generation_config
    # Sampling, a penalty and a minimum length would each change the tokens; the eos (1) would stop at the first.
    model.generation_config = GenerationConfig(
        do_sample=True, temperature=5.0, repetition_penalty=3.0, min_new_tokens=12, eos_token_id=1, pad_token_id=0
    )
    try:
        assert generate_case(fixture_models, "right/hint=5/kept") == EXPECTED["right/hint=5/kept"]
        assert model.generation_config.repetition_penalty == 3.0  # restored after the call
    finally:
        model.generation_config = own


def test_synced_gpus_generates_the_same_tokens(fixture_models, tmp_path):
    # One process in a gloo group: generate then asks the group at every step whether all are done; same tokens.
    import torch.distributed as dist

    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'rendezvous'}", rank=0, world_size=1)
    try:
        side, mode, _, _ = CASES["right/hint=5/kept"]
        model, tokenizer = fixture_models[side]
        prompts, shifts = zip(*(prompt_and_shift(tokenizer, question, mode, side) for question in QUESTIONS))
        out = generate_batched(model, tokenizer, list(prompts), 16, 4, position_shifts=list(shifts), synced_gpus=True)
    finally:
        dist.destroy_process_group()
    assert [" ".join(tokenizer.convert_ids_to_tokens(ids)) for ids in out] == EXPECTED["right/hint=5/kept"]


class _WithoutPositions(torch.nn.Module):
    """A causal LM whose ``forward`` takes no ``position_ids``."""

    def __init__(self, model):
        super().__init__()
        self.model, self.config, self.generation_config = model, model.config, model.generation_config

    def forward(self, input_ids, attention_mask=None, **kwargs):
        return self.model(input_ids=input_ids, attention_mask=attention_mask)


def test_models_generate_cannot_serve_are_refused(fixture_models):
    model, tokenizer = fixture_models["left"]
    prompt, shift = prompt_and_shift(tokenizer, QUESTIONS[0], "implicit", "left")
    bare = _WithoutPositions(model)
    with pytest.raises(ValueError, match=r"^_WithoutPositions has no generate method; pass a transformers causal LM"):
        generate_batched(bare, tokenizer, [prompt], max_new_tokens=4)
    bare.generate = model.generate  # now it can generate, but kept positions have nowhere to go
    with pytest.raises(ValueError, match=r"^_WithoutPositions.forward takes no position_ids, so the kept positions"):
        generate_batched(bare, tokenizer, [prompt], max_new_tokens=4, position_shifts=[shift])


# Recorded from hf_icot/generation.py at commit 8a8185e (the hand-written loop with a KV cache) on this fixture.
EXPECTED: dict[str, list[str]] = {
    "left/explicit": [
        "#### 1 1 1 2 <eos> #### 2 <eos>",
        "#### 1 1 2 2 <eos> #### 2 <eos>",
        "#### 3 3 3 <eos> #### 3 <eos>",
        "#### 0 0 0 0 <eos> #### 1 <eos>",
        "#### 2 2 2 3 <eos> #### 3 <eos>",
        "#### 2 2 2 2 2 <eos> #### 2 <eos>",
        "#### 2 2 2 2 <eos> #### 2 <eos>",
        "#### 1 1 1 1 <eos> #### 1 <eos>",
        "#### 1 2 2 3 3 <eos> #### 3 <eos>",
    ],
    "left/implicit": [
        "#### 1 1 2 <eos>",
        "#### 1 2 2 <eos>",
        "#### 3 3 <eos>",
        "#### 0 0 0 <eos>",
        "#### 2 2 3 <eos>",
        "#### 2 2 <eos>",
        "#### 2 <eos>",
        "#### 0 <eos>",
        "#### 2 2 2 3 <eos>",
    ],
    "left/implicit/kept": [
        "#### 1 <eos>",
        "#### 2 <eos>",
        "#### 3 <eos>",
        "#### 1 <eos>",
        "#### 3 <eos>",
        "#### 2 <eos>",
        "#### 2 <eos>",
        "#### 1 <eos>",
        "#### 3 <eos>",
    ],
    "left/hint=0/kept": [
        "<eos> #### 2 <eos>",
        "<eos> #### 2 <eos>",
        "<eos> #### 3 <eos>",
        "<eos> #### 1 <eos>",
        "<eos> #### 4 <eos>",
        "<eos> #### 2 <eos>",
        "<eos> #### 2 <eos>",
        "<eos> #### 2 <eos>",
        "<eos> #### 3 <eos>",
    ],
    "left/hint=2": [
        "2 2 2 2 2 2 <eos> #### 2 <eos>",
        "1 1 2 2 <eos> #### 2 <eos>",
        "3 3 3 3 3 <eos> #### 3 <eos>",
        "0 0 0 0 <eos> #### 1 <eos>",
        "3 3 3 3 4 5 <eos> #### 4 <eos>",
        "2 2 2 2 2 <eos> #### 2 <eos>",
        "2 2 2 2 <eos> #### 2 <eos>",
        "1 1 1 1 2 3 <eos> #### 3 <eos>",
        "2 2 2 3 3 <eos> #### 3 <eos>",
    ],
    "left/hint=2/kept": [
        "2 2 <eos> #### 2 <eos>",
        "1 2 <eos> #### 2 <eos>",
        "3 3 <eos> #### 3 <eos>",
        "0 0 <eos> #### 1 <eos>",
        "3 4 <eos> #### 4 <eos>",
        "2 2 <eos> #### 2 <eos>",
        "2 2 <eos> #### 2 <eos>",
        "1 2 <eos> #### 2 <eos>",
        "2 3 <eos> #### 3 <eos>",
    ],
    "left/hint=5/kept": [
        "1 1 1 2 2 <eos> #### 2 <eos>",
        "0 1 1 1 <eos> #### 2 <eos>",
        "1 2 3 3 3 <eos> #### 3 <eos>",
        "0 0 0 0 <eos> #### 1 <eos>",
        "1 2 3 4 5 <eos> #### 4 <eos>",
        "1 2 2 2 2 <eos> #### 2 <eos>",
        "1 2 2 2 <eos> #### 2 <eos>",
        "0 0 1 1 2 <eos> #### 2 <eos>",
        "0 1 1 2 3 <eos> #### 3 <eos>",
    ],
    "left/hint=5/kept/one_batch": [
        "1 1 1 2 2 <eos> #### 2 <eos>",
        "0 1 1 1 <eos> #### 2 <eos>",
        "1 2 3 3 3 <eos> #### 3 <eos>",
        "0 0 0 0 <eos> #### 1 <eos>",
        "1 2 3 4 5 <eos> #### 4 <eos>",
        "1 2 2 2 2 <eos> #### 2 <eos>",
        "1 2 2 2 <eos> #### 2 <eos>",
        "0 0 1 1 2 <eos> #### 2 <eos>",
        "0 1 1 2 3 <eos> #### 3 <eos>",
    ],
    "left/implicit/kept/to_context": [
        "#### 1 <eos> #### 1 <eos> #### 1 <eos> #### 1 <eos> #### 1 <eos> #### 1 <eos>",
        "#### 2 <eos> #### 2 <eos> <eos> <eos> #### 2 <eos> #### 2 <eos> #### 2 <eos> #### 2 <eos>",
        "#### 3 <eos> #### 3 <eos> #### 3 <eos> #### 3 <eos> #### 3 <eos> #### 3 <eos> #### 3",
        "#### 1 <eos> #### 1 <eos> <eos> <eos> #### 1 <eos> #### 1 <eos> #### 1 <eos> #### 1 <eos>",
        "#### 3 <eos> #### 3 <eos> #### 3 <eos> #### 3 <eos> #### 3 <eos> #### 3 <eos>",
        "#### 2 <eos> #### 2 <eos> #### 2 <eos> #### 2 <eos> #### 2 <eos> #### 2 <eos>",
        "#### 2 <eos> #### 2 <eos> <eos> <eos> #### 2 <eos> #### 2 <eos> #### 2 <eos> #### 2 <eos>",
        "#### 1 <eos> #### 1 <eos> #### 1 <eos> #### 1 <eos> #### 1 <eos> #### 1 <eos>",
        "#### 3 <eos> #### 3 <eos> #### 3 <eos> #### 3 <eos> #### 3 <eos> #### 3 <eos>",
    ],
    "right/explicit": [
        "#### 1 1 <eos> #### 2 <eos>",
        "#### 2 <eos> #### 2 <eos>",
        "#### 3 <eos> #### 3 <eos>",
        "#### 1 <eos> #### 1 <eos>",
        "#### 3 <eos> #### 3 <eos>",
        "#### 2 <eos> #### 2 <eos>",
        "#### 2 <eos> #### 2 <eos>",
        "#### 1 <eos> #### 2 <eos>",
        "#### 2 <eos> #### 3 <eos>",
    ],
    "right/implicit": [
        "#### 1 <eos>",
        "#### 2 <eos>",
        "#### 3 <eos>",
        "#### 1 <eos>",
        "#### 1 1 <eos>",
        "#### 2 <eos>",
        "#### 2 <eos>",
        "#### 1 <eos>",
        "#### 2 <eos>",
    ],
    "right/implicit/kept": [
        "#### 2 <eos>",
        "#### 2 <eos>",
        "#### 3 <eos>",
        "#### 1 <eos>",
        "#### 3 <eos>",
        "#### 2 <eos>",
        "#### 2 <eos>",
        "#### 2 <eos>",
        "#### 3 <eos>",
    ],
    "right/hint=0/kept": [
        "<eos> #### 2 <eos>",
        "<eos> #### 2 <eos>",
        "<eos> #### 3 <eos>",
        "<eos> #### 1 <eos>",
        "<eos> #### 4 <eos>",
        "<eos> #### 2 <eos>",
        "<eos> #### 2 <eos>",
        "<eos> #### 2 <eos>",
        "<eos> #### 3 <eos>",
    ],
    "right/hint=2": [
        "1 1 <eos> #### 2 <eos>",
        "0 1 <eos> #### 2 <eos>",
        "1 2 <eos> #### 3 <eos>",
        "0 0 <eos> #### 1 <eos>",
        "1 1 <eos> #### 3 <eos>",
        "1 2 <eos> #### 2 <eos>",
        "1 1 <eos> #### 2 <eos>",
        "0 0 <eos> #### 2 <eos>",
        "0 1 <eos> #### 3 <eos>",
    ],
    "right/hint=2/kept": [
        "1 1 <eos> #### 2 <eos>",
        "0 1 <eos> #### 2 <eos>",
        "1 2 <eos> #### 3 <eos>",
        "0 0 <eos> #### 1 <eos>",
        "1 1 <eos> #### 4 <eos>",
        "1 2 <eos> #### 2 <eos>",
        "1 1 <eos> #### 2 <eos>",
        "0 0 <eos> #### 2 <eos>",
        "0 1 <eos> #### 3 <eos>",
    ],
    "right/hint=5/kept": [
        "1 1 1 1 2 <eos> #### 2 <eos>",
        "0 1 1 2 2 3 <eos> #### 3 <eos>",
        "1 2 3 3 3 <eos> #### 3 <eos>",
        "0 0 0 0 <eos> #### 1 <eos>",
        "1 1 1 2 3 <eos> #### 4 <eos>",
        "1 2 2 2 2 <eos> #### 2 <eos>",
        "1 1 2 2 2 2 <eos> #### 3 <eos>",
        "0 0 0 0 1 <eos> #### 2 <eos>",
        "0 1 1 2 3 <eos> #### 3 <eos>",
    ],
    "right/hint=5/kept/one_batch": [
        "1 1 1 1 2 <eos> #### 2 <eos>",
        "0 1 1 2 2 3 <eos> #### 3 <eos>",
        "1 2 3 3 3 <eos> #### 3 <eos>",
        "0 0 0 0 <eos> #### 1 <eos>",
        "1 1 1 2 3 <eos> #### 4 <eos>",
        "1 2 2 2 2 <eos> #### 2 <eos>",
        "1 1 2 2 2 2 <eos> #### 3 <eos>",
        "0 0 0 0 1 <eos> #### 2 <eos>",
        "0 1 1 2 3 <eos> #### 3 <eos>",
    ],
    "right/implicit/kept/to_context": [
        "#### 2 <eos> #### 2 <eos> #### 2 <eos> #### 2 <eos> #### 2 <eos> #### 2 <eos>",
        "#### 2 <eos> #### 3 <eos> #### 2 <eos> #### 2 <eos> #### 2 <eos> #### 2 <eos> #### 2",
        "#### 3 <eos> #### 4 <eos> #### 3 <eos> #### 3 <eos> #### 3 <eos> #### 3 <eos> #### 3",
        "#### 1 <eos> #### 1 <eos> #### 1 <eos> #### 1 <eos> #### 1 <eos> #### 1 <eos> #### 1",
        "#### 3 <eos> #### 4 <eos> #### 4 <eos> #### 4 <eos> #### 4 <eos> #### 4 <eos>",
        "#### 2 <eos> #### 2 <eos> #### 2 <eos> #### 2 <eos> #### 2 <eos> #### 2 <eos>",
        "#### 2 <eos> #### 3 <eos> #### 2 <eos> #### 2 <eos> #### 2 <eos> #### 2 <eos> #### 2",
        "#### 2 <eos> #### 2 <eos> #### 2 <eos> #### 2 <eos> #### 2 <eos> #### 2 <eos>",
        "#### 3 <eos> #### 4 <eos> #### 3 <eos> #### 3 <eos> #### 3 <eos> #### 3 <eos>",
    ],
}
