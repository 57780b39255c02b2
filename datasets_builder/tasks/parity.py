"""k-sparse parity: the XOR of k secret positions among n uniform bits, with a chain or a tree of partial parities.

The secret support S (k positions, ascending) is drawn from the seed and stated on the dataset card. With the
``chain`` layout, step j (1 .. k-1) is the parity of the first j + 1 secret bits; with the ``tree`` layout (k a power of
two) level 1 holds the parities of consecutive pairs of secret bits, level 2 the parities of pairs of those, and so on
up to the root, level by level. Both layouts have k - 1 steps of one token and a ``cot_level`` column (all 1 for the
chain) so they share features.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

import datasets
import numpy as np
import pyarrow as pa

from datasets_builder.columns import build_splits, levels_column, steps_column, text_column
from datasets_builder.sampling import RowSpace, draw_distinct
from hf_icot.cot import example_features

TASK_NAME = "parity"
GENERATOR_VERSION = "1.0"
DESCRIPTION = (
    "k-sparse parity: each question is a string of n uniformly random bits and the answer is the parity (XOR) of the "
    "bits at k secret positions, the same for every example and stated below. The chain of thought gives partial "
    "parities of the secret bits, either as a chain (the parity of the first 2, 3, ..., k secret bits) or as a "
    "balanced binary tree (parities of pairs, then of pairs of pairs, up to the root), with each step's tree level in "
    "cot_level. No input appears in two splits."
)

VOCAB = ("0", "1")
LAYOUTS = ("chain", "tree")
SPLITS = ("test", "validation", "train")  # drawn in this order, so test does not move when train grows


@dataclass
class Params:
    """What a sparse-parity dataset is built from."""

    n_bits: int = field(default=20, metadata={"help": "Input bits n (>= 2)."})
    k: int = field(default=8, metadata={"help": "Secret positions k (1 <= k <= n; a power of two for the tree)."})
    cot_layout: str = field(default="chain", metadata={"help": "CoT layout: 'chain' or 'tree'.", "choices": LAYOUTS})
    train_size: int = field(default=100_000, metadata={"help": "Examples in the train split (>= 1)."})
    validation_size: int = field(default=1_000, metadata={"help": "Examples in the validation split (>= 1)."})
    test_size: int = field(default=1_000, metadata={"help": "Examples in the test split (>= 1)."})
    seed: int = field(default=0, metadata={"help": "Random seed (>= 0): draws the secret support and the inputs."})

    def __post_init__(self) -> None:
        if not isinstance(self.n_bits, int) or self.n_bits < 2:
            # 1 bit has 2 distinct inputs, and the three disjoint splits need at least 3
            raise ValueError(
                f"n_bits={self.n_bits!r} is not allowed; use n_bits >= 2, so that the train, validation and test "
                "splits can each hold a distinct input."
            )
        if not isinstance(self.k, int) or not 1 <= self.k <= self.n_bits:
            raise ValueError(
                f"k={self.k!r} is not allowed; the secret needs 1 <= k <= n_bits={self.n_bits} positions."
            )
        if self.cot_layout not in LAYOUTS:
            raise ValueError(f"cot_layout={self.cot_layout!r} is unknown; allowed: {', '.join(LAYOUTS)}.")
        if self.cot_layout == "tree" and self.k & (self.k - 1):
            raise ValueError(f"k={self.k} is not a power of two; the tree layout pairs bits up to one root.")
        for name in ("train_size", "validation_size", "test_size"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"{name}={value!r} is not allowed; each split needs at least 1 example.")
        if not isinstance(self.seed, int) or self.seed < 0:
            raise ValueError(f"seed={self.seed!r} is not allowed; use an integer >= 0.")
        total = self.train_size + self.validation_size + self.test_size
        if total > 2**self.n_bits:
            raise ValueError(
                f"{total} examples were asked for but only {2**self.n_bits} distinct inputs of {self.n_bits} bits "
                "exist; ask for at most that many."
            )

    def config_name(self) -> str:
        return f"parity_n{self.n_bits}_k{self.k}_{self.cot_layout}"

    def split_sizes(self) -> dict[str, int]:
        return {split: getattr(self, f"{split}_size") for split in SPLITS}


def secret_support(params: Params) -> list[int]:
    """The k secret positions (0-based, ascending), a function of ``seed``, ``n_bits`` and ``k`` only."""
    rng = np.random.default_rng([params.seed, 1])
    return sorted(int(i) for i in rng.choice(params.n_bits, size=params.k, replace=False))


def cot_levels(params: Params) -> list[int]:
    """The tree level of each CoT step: all 1 for the chain; k/2 ones, k/4 twos, ... for the tree."""
    if params.cot_layout == "chain":
        return [1] * (params.k - 1)
    levels, width, level = [], params.k // 2, 1
    while width >= 1:
        levels += [level] * width
        width, level = width // 2, level + 1
    return levels


def partial_parities(secret_bits: np.ndarray, layout: str) -> np.ndarray:
    """The CoT values for ``(n, k)`` secret bits in ascending position order: ``(n, k - 1)``, in step order."""
    if layout == "chain":
        return np.bitwise_xor.accumulate(secret_bits, axis=1)[:, 1:]
    levels, current = [], secret_bits
    while current.shape[1] > 1:
        current = current[:, 0::2] ^ current[:, 1::2]
        levels.append(current)
    return np.concatenate(levels, axis=1) if levels else secret_bits[:, :0]


def render_rows(rows: np.ndarray, support: list[int], layout: str, levels: list[int]) -> dict[str, pa.Array]:
    """The ``question``, ``cot``, ``answer`` and ``cot_level`` columns for ``(n, n_bits)`` input bits."""
    secret_bits = rows[:, support]
    steps = partial_parities(secret_bits, layout)
    answer = np.bitwise_xor.reduce(secret_bits, axis=1)[:, None]
    return {
        "question": text_column(rows, VOCAB),
        "cot": steps_column(steps, VOCAB, [1] * steps.shape[1]),
        "answer": text_column(answer, VOCAB),
        "cot_level": levels_column(levels, len(rows)),
    }


def features() -> datasets.Features:
    return example_features(with_levels=True)


def build(params: Params, progress: bool = False) -> datasets.DatasetDict:
    """Splits ``train``, ``validation`` and ``test`` of distinct inputs, deterministic in ``params``."""
    sizes = params.split_sizes()
    rng = np.random.default_rng([params.seed, 0])
    blocks = draw_distinct(RowSpace.uniform(params.n_bits, 2), list(sizes.values()), rng, what="inputs")
    support, levels = secret_support(params), cot_levels(params)
    ordered = {split: blocks[SPLITS.index(split)] for split in ("train", "validation", "test")}
    return build_splits(
        ordered,
        lambda chunk: render_rows(chunk, support, params.cot_layout, levels),
        features(),
        TASK_NAME,
        GENERATOR_VERSION,
        asdict(params),
        progress,
    )


def card_details(params: Params) -> dict[str, str]:
    """Facts the dataset card states beyond the description, the secret support first."""
    layout = (
        "chain: step j is the parity of the first j+1 secret bits"
        if params.cot_layout == "chain"
        else "tree: level 1 = parities of consecutive pairs of secret bits, each next level pairs the previous one"
    )
    return {
        "secret support (0-based positions, ascending)": ", ".join(map(str, secret_support(params))),
        "input bits": str(params.n_bits),
        "k": str(params.k),
        "chain of thought layout": layout,
        "splits": "train, validation and test are disjoint in inputs",
        "seed": str(params.seed),
    }
