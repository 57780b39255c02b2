"""Generation equivalence: on two saved trained models, every mode the evaluation uses generates exactly the tokens
recorded from the hand-written greedy loop that ``hf_icot.generation`` had before ``model.generate``.

The models (``generation_fixture/``, built by ``build_generation_fixture.py``) are 2-layer GPT-2s trained on counting
questions of 4 to 6 letters with a token mixture, length hints and ``keep_position``, one removing CoT tokens from the
left and one from the right. Their generations are partly right and partly wrong, and where the kept positions go
changes them (see ``test_the_recorded_outputs_depend_on_the_kept_positions``), so a generation that misplaces a
position, a stop or a padded row fails here.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from hf_icot.generation import generate_batched

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
