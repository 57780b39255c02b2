"""Tiny study data and models for the diagnostics tests.

:func:`study_examples` lays rows out as the "marginals before conditionals" study does,
``<bos> b b <sep> z z <sep> a a <eos>`` (shorter strings), with the loss on ``a a <eos>``: every base B has K answers,
one per selector z, and the selectors are shared by all bases, so only z tells a base's answers apart.
"""

from __future__ import annotations

import itertools

import torch
from transformers import GPT2Config, GPT2LMHeadModel

PAD, BOS, EOS, SEP = 0, 1, 2, 3
BASE_TOKENS = (4, 5, 6, 7)
SELECTOR_TOKENS = (8, 9, 10)
ANSWER_TOKENS = tuple(range(11, 23))
VOCAB_SIZE = 23
#: Positions in a row: <bos> b b <sep> z z <sep> a a <eos>.
SELECTOR_POSITIONS = [4, 5]
ANSWER_START = 7


def study_examples(n_bases: int = 4, k: int = 2) -> list[dict]:
    """``n_bases * k`` rows (``n_bases`` <= 4, ``k`` <= 3): base i is (b_i, b_{i+1}), selector j is (z_j, z_j), and
    answer (i, j) starts with its own token (up to 4 x 2 pairs), so the first target token tells B and z apart."""
    bases = [(BASE_TOKENS[i], BASE_TOKENS[(i + 1) % 4]) for i in range(n_bases)]
    rows = []
    for (i, base), j in itertools.product(enumerate(bases), range(k)):
        selector = (SELECTOR_TOKENS[j], SELECTOR_TOKENS[j])
        answer = (ANSWER_TOKENS[i * k + j], ANSWER_TOKENS[-1 - i])
        ids = [BOS, *base, SEP, *selector, SEP, *answer, EOS]
        rows.append(
            {
                "input_ids": ids,
                "labels": [-100] * ANSWER_START + ids[ANSWER_START:],
                "group": f"B{i}",
                "selector": f"z{j}",
                "selector_positions": list(SELECTOR_POSITIONS),
            }
        )
    return rows


def tiny_gpt2(seed: int = 0, **overrides) -> GPT2LMHeadModel:
    torch.manual_seed(seed)
    values = dict(
        vocab_size=VOCAB_SIZE,
        n_positions=16,
        n_embd=32,
        n_layer=2,
        n_head=2,
        bos_token_id=BOS,
        eos_token_id=EOS,
        pad_token_id=PAD,
    )
    values.update(overrides)
    return GPT2LMHeadModel(GPT2Config(**values))


def train(model: torch.nn.Module, rows: list[dict], steps: int = 300, lr: float = 1e-2) -> torch.nn.Module:
    """Full-batch Adam on the rows' labelled tokens (a few seconds for the tiny model)."""
    ids = torch.tensor([row["input_ids"] for row in rows])
    labels = torch.tensor([row["labels"] for row in rows])
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    model.train()
    for _ in range(steps):
        optimizer.zero_grad()
        model(input_ids=ids, labels=labels).loss.backward()
        optimizer.step()
    return model.eval()
