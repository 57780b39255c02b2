"""The K-fold ambiguity task of the "marginals before conditionals" study.

Each base string B has K continuations A, told apart only by a selector z that all bases share. A model first learns
the marginal p(A | B) — K equally likely answers, entropy log K — and only later the conditional p(A | B, z), which
is deterministic. Targets are globally unique, so ``(B, z) -> A`` is a function and ``A`` alone identifies ``B``.

Four directions, as the study's code names them: ``bz_to_a`` (the ambiguous task the selector resolves), ``b_to_a``
(the selector hidden: irreducibly log K-ambiguous), ``az_to_b`` (A and a redundant z, answer B) and ``a_to_b`` (A
alone, answer its B: unambiguous, no selector, K targets per base mapping to the same B).
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field

import datasets
from tqdm import tqdm

from hf_icot.cot import example_features

TASK_NAME = "ambiguity"
GENERATOR_VERSION = "1"
DESCRIPTION = (
    "K-fold ambiguity (marginals before conditionals): n_b random base strings B, K selector strings z shared by "
    "all bases, and for every pair (B, z) its own target string A, unique across the whole dataset. Hence "
    "H(A|B) = log K while H(A|B,z) = 0, and the D = K * n_b examples are learned by memorisation. There is no chain "
    "of thought (empty `cot`). The `test` split is the training set itself: the task measures how a model fits "
    "the training data, not how it generalises. Columns `group` (the base B) and `selector` (z) identify each "
    "example's cell."
)

ALPHABET = "abcdefghijklmnopqrstuvwxyz0123456789"
DIRECTIONS = ("bz_to_a", "az_to_b", "b_to_a", "a_to_b")
#: The directions whose question shows the selector.
SELECTOR_SHOWN = ("bz_to_a", "az_to_b")
_DEFAULT_LENGTHS = (6, 2, 4)


@dataclass
class Params:
    """Parameters of the ambiguity task; see the module docstring."""

    n_bases: int = field(default=1000, metadata={"help": "Number n_b of base strings B."})
    k: int = field(default=4, metadata={"help": "Number K of selector strings z, i.e. answers per base."})
    direction: str = field(
        default="bz_to_a",
        metadata={
            "help": "bz_to_a: question B z, answer A; az_to_b: question A z, answer B; "
            "b_to_a: question B, answer A (the selector is not shown); a_to_b: question A, answer B (no selector).",
            "choices": DIRECTIONS,
        },
    )
    base_length: int = field(default=6, metadata={"help": "Characters per base string B."})
    selector_length: int = field(default=2, metadata={"help": "Characters per selector string z."})
    target_length: int = field(default=4, metadata={"help": "Characters per target string A."})
    distinct_first_chars: bool = field(
        default=False,
        metadata={
            "help": "The K targets of one base start with K different characters, so the first target token alone "
            "carries the log K ambiguity (the study's enforce_unique_a_first_char_per_b; caps K at 36)."
        },
    )
    seed: int = field(default=0, metadata={"help": "Random seed for the strings and the row order."})

    def __post_init__(self) -> None:
        for name in ("n_bases", "k", "base_length", "selector_length", "target_length"):
            value = getattr(self, name)
            if value < 1:
                raise ValueError(f"{name}={value} is not allowed; it must be at least 1.")
        if self.direction not in DIRECTIONS:
            raise ValueError(f"direction {self.direction!r} is unknown; allowed: {', '.join(DIRECTIONS)}.")
        n_selectors = len(ALPHABET) ** self.selector_length
        if self.k > n_selectors:
            raise ValueError(
                f"k={self.k} is larger than the {n_selectors} distinct selectors of {self.selector_length} characters; "
                f"use k <= {n_selectors} or a longer selector_length."
            )
        n_bases = len(ALPHABET) ** self.base_length
        if self.n_bases > n_bases:
            raise ValueError(
                f"n_bases={self.n_bases} is larger than the {n_bases} distinct bases of {self.base_length} characters; "
                f"use n_bases <= {n_bases} or a longer base_length."
            )
        if self.distinct_first_chars and self.k > len(ALPHABET):
            raise ValueError(
                f"k={self.k} targets cannot start with distinct characters of the {len(ALPHABET)}-character alphabet; "
                f"use k <= {len(ALPHABET)} or distinct_first_chars=False."
            )
        n_targets = len(ALPHABET) ** self.target_length
        if self.k * self.n_bases > n_targets:
            raise ValueError(
                f"k * n_bases = {self.k * self.n_bases} targets do not fit in the {n_targets} distinct targets of "
                f"{self.target_length} characters; lower k or n_bases, or use a longer target_length."
            )

    def config_name(self) -> str:
        name = f"{self.direction}_b{self.n_bases}_k{self.k}_seed{self.seed}"
        lengths = (self.base_length, self.selector_length, self.target_length)
        if lengths != _DEFAULT_LENGTHS:
            name += "_len{}x{}x{}".format(*lengths)
        if self.distinct_first_chars:
            name += "_distinct_first"
        return name


def _distinct_strings(rng: random.Random, count: int, length: int) -> list[str]:
    """``count`` distinct random strings of ``length`` characters of :data:`ALPHABET`, in random order."""
    base = len(ALPHABET)
    strings = []
    for number in rng.sample(range(base**length), count):
        chars = []
        for _ in range(length):
            number, digit = divmod(number, base)
            chars.append(ALPHABET[digit])
        strings.append("".join(chars))
    return strings


def _targets_with_distinct_first_chars(rng: random.Random, params: Params) -> list[str]:
    """``k * n_bases`` globally distinct targets, base by base: each base's ``k`` start with ``k`` distinct
    characters. The rest of each target is drawn among the strings not yet used after that first character."""
    rest_length = params.target_length - 1
    used: dict[str, set[str]] = {char: set() for char in ALPHABET}
    targets = []
    for _ in range(params.n_bases):
        for first in rng.sample(ALPHABET, params.k):
            if len(used[first]) == len(ALPHABET) ** rest_length:
                raise ValueError(
                    f"{params.n_bases} bases need more targets starting with {first!r} than the "
                    f"{len(ALPHABET) ** rest_length} of {params.target_length} characters; use a longer target_length."
                )
            while True:
                rest = "".join(rng.choice(ALPHABET) for _ in range(rest_length))
                if rest not in used[first]:
                    break
            used[first].add(rest)
            targets.append(first + rest)
    return targets


def _spaced(*strings: str) -> str:
    return " ".join(char for string in strings for char in string)


def build(params: Params, progress: bool = False) -> datasets.DatasetDict:
    """The ambiguity dataset of ``params``: splits ``train`` and ``test``, identical, of ``k * n_bases`` rows."""
    rng = random.Random(params.seed)
    bases = _distinct_strings(rng, params.n_bases, params.base_length)
    selectors = _distinct_strings(rng, params.k, params.selector_length)
    if params.distinct_first_chars:
        targets = iter(_targets_with_distinct_first_chars(rng, params))
    else:
        targets = iter(_distinct_strings(rng, params.k * params.n_bases, params.target_length))

    rows = []
    for base in tqdm(bases, desc="ambiguity bases", disable=not progress):
        for selector in selectors:
            target = next(targets)
            if params.direction == "bz_to_a":
                question, answer = _spaced(base, selector), _spaced(target)
            elif params.direction == "az_to_b":
                question, answer = _spaced(target, selector), _spaced(base)
            elif params.direction == "a_to_b":
                question, answer = _spaced(target), _spaced(base)
            else:
                question, answer = _spaced(base), _spaced(target)
            rows.append((question, answer, base, selector))
    rng.shuffle(rows)

    features = example_features({"group": datasets.Value("string"), "selector": datasets.Value("string")})
    columns = {
        "question": [row[0] for row in rows],
        "cot": [[] for _ in rows],
        "answer": [row[1] for row in rows],
        "group": [row[2] for row in rows],
        "selector": [row[3] for row in rows],
    }
    train = datasets.Dataset.from_dict(columns, features=features)
    return datasets.DatasetDict({"train": train, "test": train})


def card_details(params: Params) -> dict[str, str]:
    shown = {
        "bz_to_a": "B then z",
        "az_to_b": "A then z",
        "b_to_a": "B only (the selector is hidden, so the answer is ambiguous)",
        "a_to_b": "A only (no selector; each A has one B, so the answer is unambiguous)",
    }[params.direction]
    return {
        "examples": f"D = K * n_b = {params.k} * {params.n_bases} = {params.k * params.n_bases}",
        "evaluation set": "the `test` split is the training set itself (a memorisation task)",
        "entropies": f"H(A|B) = log K = {math.log2(params.k):.3f} bits; H(A|B,z) = 0",
        "question": f"{shown}, one character per token",
        "alphabet": f"{len(ALPHABET)} characters, a-z and 0-9",
        "first target characters": (
            "distinct among the K targets of a base (the first target token alone is log K-ambiguous)"
            if params.distinct_first_chars
            else "drawn freely (two targets of a base may share their first character)"
        ),
    }
