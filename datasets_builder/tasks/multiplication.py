"""Multi-digit multiplication in the format of the public stepwise-ICoT reference.

An example multiplies an ``a_digits``-digit number by a ``b_digits``-digit number, every digit written least
significant first and separated by spaces::

    5 6 3 2 * 7 4 3 4||5 5 5 6 1 + 0 0 6 4 9 0 ( 5 5 1 1 1 1 ) + 0 0 5 9 0 7 0 ( 5 5 6 0 2 8 0 ) + 0 0 0 0 6 4 9 0 #### 5 5 6 0 8 2 0 1

Step 0 is the partial product ``a * b_0``; step ``i >= 1`` is ``+ p_i ( s_i )`` with ``p_i = a * b_i * 10^i`` and
``s_i`` the running sum of ``p_0 .. p_i``, both padded with zeros to ``a_digits + 1 + i`` digits; the last step drops
its running sum, which is the answer (padded to ``a_digits + b_digits`` digits). All arithmetic is digit-wise on numpy
arrays, so any number of digits works and the 808,000 training examples of the reference build in seconds.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

import datasets
import numpy as np
import pyarrow as pa

from datasets_builder.columns import build_splits, steps_column, text_column
from datasets_builder.sampling import RowSpace, draw_distinct
from hf_icot.cot import example_features

TASK_NAME = "multiplication"
GENERATOR_VERSION = "1.0"
DESCRIPTION = (
    "Multi-digit multiplication with a stepwise chain of thought, in the text format of the public stepwise "
    "implicit-chain-of-thought reference: operands and results are written digit by digit, least significant digit "
    "first. The chain of thought lists the partial product of the first operand with each digit of the second, "
    "shifted into place, each followed (except the last) by the running sum in parentheses; the answer is the "
    "product. Operands are drawn uniformly among numbers with the stated digit counts, and no operand pair appears "
    "in two splits."
)

# Token ids: digits are their own ids, then the operators.
VOCAB = ("0", "1", "2", "3", "4", "5", "6", "7", "8", "9", "*", "+", "(", ")")
TIMES, PLUS, OPEN, CLOSE = 10, 11, 12, 13
SPLITS = ("test", "validation", "train")  # drawn in this order, so test does not move when train grows


@dataclass
class Params:
    """What a multiplication dataset is built from."""

    a_digits: int = field(default=4, metadata={"help": "Digits of the first operand (>= 1)."})
    b_digits: int = field(default=4, metadata={"help": "Digits of the second operand (>= 1); one CoT step each."})
    train_size: int = field(default=808_000, metadata={"help": "Examples in the train split (>= 1)."})
    validation_size: int = field(default=1_000, metadata={"help": "Examples in the validation split (>= 1)."})
    test_size: int = field(default=1_000, metadata={"help": "Examples in the test split (>= 1)."})
    seed: int = field(default=0, metadata={"help": "Random seed (>= 0); same seed, same rows."})

    def __post_init__(self) -> None:
        for name in ("a_digits", "b_digits"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"{name}={value!r} is not allowed; an operand needs at least 1 digit.")
        for name in ("train_size", "validation_size", "test_size"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"{name}={value!r} is not allowed; each split needs at least 1 example.")
        if not isinstance(self.seed, int) or self.seed < 0:
            raise ValueError(f"seed={self.seed!r} is not allowed; use an integer >= 0.")
        total = self.train_size + self.validation_size + self.test_size
        pairs = operand_space(self.a_digits, self.b_digits).size
        if total > pairs:
            raise ValueError(
                f"{total} examples were asked for but only {pairs} distinct operand pairs of "
                f"{self.a_digits}x{self.b_digits} digits exist; ask for at most that many."
            )

    def config_name(self) -> str:
        return f"mult_{self.a_digits}x{self.b_digits}"

    def split_sizes(self) -> dict[str, int]:
        return {split: getattr(self, f"{split}_size") for split in SPLITS}


def operand_space(a_digits: int, b_digits: int) -> RowSpace:
    """Rows of ``a_digits`` digits of ``a`` then ``b_digits`` of ``b``, least significant first; the leading digit of
    each operand is 1..9, so both are uniform over numbers with exactly that many digits."""
    sizes = (10,) * (a_digits - 1) + (9,) + (10,) * (b_digits - 1) + (9,)
    offsets = (0,) * (a_digits - 1) + (1,) + (0,) * (b_digits - 1) + (1,)
    return RowSpace(sizes, offsets)


def _times_digit(a: np.ndarray, digit: np.ndarray) -> np.ndarray:
    """``a * digit`` for an ``(n, d)`` digit matrix (least significant first) and ``(n,)`` digits: ``(n, d + 1)``."""
    out = np.empty((a.shape[0], a.shape[1] + 1), dtype=np.uint8)
    carry = np.zeros(a.shape[0], dtype=np.int16)
    for j in range(a.shape[1]):
        carry, out[:, j] = np.divmod(a[:, j].astype(np.int16) * digit + carry, 10)
    out[:, -1] = carry
    return out


def _add(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Digit-wise ``x + y`` on the width of ``y`` (``x`` no wider; the callers guarantee the sum fits)."""
    out = np.empty_like(y)
    carry = np.zeros(y.shape[0], dtype=np.int16)
    for j in range(y.shape[1]):
        left = x[:, j].astype(np.int16) if j < x.shape[1] else 0
        carry, out[:, j] = np.divmod(left + y[:, j] + carry, 10)
    return out


def _column(n: int, token: int) -> np.ndarray:
    return np.full((n, 1), token, dtype=np.uint8)


def render_rows(rows: np.ndarray, a_digits: int, b_digits: int) -> dict[str, pa.Array]:
    """The ``question``, ``cot`` and ``answer`` columns for operand rows of :func:`operand_space`."""
    n = rows.shape[0]
    a, b = rows[:, :a_digits], rows[:, a_digits:]
    pieces, step_lengths = [], []
    running = None
    for i in range(b_digits):
        partial = _times_digit(a, b[:, i].astype(np.int16))
        partial = np.concatenate([np.zeros((n, i), dtype=np.uint8), partial], axis=1)  # times 10^i
        running = partial if running is None else _add(running, partial)
        if i == 0:
            step = [partial]
        elif i < b_digits - 1:
            step = [_column(n, PLUS), partial, _column(n, OPEN), running, _column(n, CLOSE)]
        else:
            step = [_column(n, PLUS), partial]
        pieces += step
        step_lengths.append(sum(piece.shape[1] for piece in step))
    question = np.concatenate([a, _column(n, TIMES), b], axis=1)
    return {
        "question": text_column(question, VOCAB),
        "cot": steps_column(np.concatenate(pieces, axis=1), VOCAB, step_lengths),
        "answer": text_column(running, VOCAB),
    }


def multiplication_example(a: int, b: int, a_digits: int, b_digits: int) -> dict:
    """The example for ``a * b`` (``question``, ``cot``, ``answer``), exactly as :func:`build` renders it.

    Raises:
        ValueError: ``a`` does not have exactly ``a_digits`` digits, or ``b`` not exactly ``b_digits``.
    """
    for name, value, digits in (("a", a, a_digits), ("b", b, b_digits)):
        if not isinstance(digits, int) or digits < 1:
            raise ValueError(f"{name}_digits={digits!r} is not allowed; an operand needs at least 1 digit.")
        if not isinstance(value, int) or not 10 ** (digits - 1) <= value < 10**digits:
            raise ValueError(
                f"{name}={value!r} is not a {digits}-digit number; it must lie in [{10 ** (digits - 1)}, {10**digits})."
            )
    row = np.array([[int(c) for c in str(a)[::-1] + str(b)[::-1]]], dtype=np.uint8)
    columns = render_rows(row, a_digits, b_digits)
    return {name: column.to_pylist()[0] for name, column in columns.items()}


def features() -> datasets.Features:
    return example_features()


def build(params: Params, progress: bool = False) -> datasets.DatasetDict:
    """Splits ``train``, ``validation`` and ``test`` of distinct operand pairs, deterministic in ``params``."""
    sizes = params.split_sizes()
    space = operand_space(params.a_digits, params.b_digits)
    rng = np.random.default_rng([params.seed, 0])
    blocks = draw_distinct(space, list(sizes.values()), rng, what="operand pairs")
    ordered = {split: blocks[SPLITS.index(split)] for split in ("train", "validation", "test")}
    return build_splits(
        ordered,
        lambda chunk: render_rows(chunk, params.a_digits, params.b_digits),
        features(),
        TASK_NAME,
        GENERATOR_VERSION,
        asdict(params),
        progress,
    )


def card_details(params: Params) -> dict[str, str]:
    """Facts the dataset card states beyond the description."""
    lo_a, lo_b = 10 ** (params.a_digits - 1), 10 ** (params.b_digits - 1)
    return {
        "operands": (
            f"first operand uniform in [{lo_a}, {10**params.a_digits - 1}], second uniform in "
            f"[{lo_b}, {10**params.b_digits - 1}], drawn without repeating a pair"
        ),
        "format": "digits least significant first; step i >= 1 is '+ partial ( running sum )', the last step '+ partial'",
        "chain of thought steps": str(params.b_digits),
        "splits": "train, validation and test are disjoint in operand pairs",
        "seed": str(params.seed),
    }
