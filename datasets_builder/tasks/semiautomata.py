"""Semiautomata: the question is a sequence of input symbols, the CoT the state after each one, the answer the last.

Four kinds share one transition-table machine:

* ``counter``: the cyclic counter C_n, inputs ``0`` (stay) and ``1`` (increment), states ``0 .. n-1`` from ``0``;
* ``cyclic``: the cyclic group C_n acting on itself, inputs ``0 .. n-1`` (add that much modulo n), states ``0 .. n-1``
  from ``0``; the final state is the sum of the inputs modulo n, which counting the two inputs of a counter cannot
  give;
* ``s3``: the symmetric group S_3 acting on itself. Elements are permutations of {0, 1, 2} in one-line notation
  (``"120"`` maps 0 to 1, 1 to 2, 2 to 0); the state starts at the identity ``"012"`` and
  ``state_t = state_{t-1} ∘ input_t``, i.e. ``state_t[x] = state_{t-1}[input_t[x]]`` (apply the input first);
* ``table``: any semiautomaton from a JSON file ``{"states": [...], "inputs": [...], "start": "...",
  "transitions": {state: {input: next_state}}}`` (a group's Cayley table is one).

Splits ``train`` and ``test`` draw inputs uniformly; each ``test_ood_<name>`` split draws them from a biased law
(counter: increments ~ Bernoulli(p) for each ``ood_p``; any kind: per-input weights from ``ood_weights``). No input
sequence appears in two splits; out-of-distribution splits are drawn without replacement and exclude every sequence
of the other splits, which flattens their law slightly where it concentrates on few sequences.
"""

from __future__ import annotations

import itertools
import json
import math
import re
import zlib
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import datasets
import numpy as np
import pyarrow as pa

from datasets_builder.columns import build_splits, steps_column, text_column
from datasets_builder.sampling import RowSpace, draw_distinct
from hf_icot.cot import example_features

TASK_NAME = "semiautomaton"
GENERATOR_VERSION = "1.0"
DESCRIPTION = (
    "Semiautomaton state tracking: each question is a sequence of input symbols, the chain of thought is the state "
    "reached after each input (one token per step), and the answer is the final state. Training and test inputs are "
    "uniform; each test_ood split draws inputs from a biased law to probe length-preserving distribution shift. No "
    "input sequence appears in two splits."
)

KINDS = ("counter", "cyclic", "s3", "table")
TABLE_KEYS = ("states", "inputs", "start", "transitions")
NAME_PATTERN = re.compile(r"[A-Za-z0-9_]+")


@dataclass(frozen=True)
class Semiautomaton:
    """A deterministic transition table: ``delta[s, i]`` is the state reached from state ``s`` on input ``i``."""

    name: str
    states: tuple[str, ...]
    inputs: tuple[str, ...]
    start: int
    delta: np.ndarray
    rule: str

    def run(self, inputs: np.ndarray) -> np.ndarray:
        """The states after each input: ``(n, T)`` input ids in, ``(n, T)`` state ids out."""
        by_time = np.ascontiguousarray(inputs.T)  # (T, n): each step reads one contiguous row
        states = np.empty(by_time.shape, dtype=self.delta.dtype)
        current = np.full(inputs.shape[0], self.start, dtype=self.delta.dtype)
        for t in range(by_time.shape[0]):
            current = self.delta[current, by_time[t]]
            states[t] = current
        return states.T


def cyclic_counter(modulus: int) -> Semiautomaton:
    """C_n: input 1 adds one modulo ``modulus``, input 0 keeps the state."""
    delta = np.stack([np.arange(modulus), (np.arange(modulus) + 1) % modulus], axis=1).astype(np.int32)
    states = tuple(str(s) for s in range(modulus))
    rule = f"state_t = (state_(t-1) + input_t) mod {modulus}; input 0 = stay, 1 = increment; start 0"
    return Semiautomaton(f"counter_c{modulus}", states, ("0", "1"), 0, delta, rule)


def cyclic_group(modulus: int) -> Semiautomaton:
    """C_n acting on itself: input i adds i modulo ``modulus``."""
    values = np.arange(modulus)
    delta = ((values[:, None] + values[None, :]) % modulus).astype(np.int32)
    states = tuple(str(s) for s in range(modulus))
    rule = f"state_t = (state_(t-1) + input_t) mod {modulus}; inputs 0..{modulus - 1}; start 0"
    return Semiautomaton(f"cyclic_c{modulus}", states, states, 0, delta, rule)


def final_states(machine: Semiautomaton, length: int) -> list[int]:
    """The states (ascending ids) that some input sequence of exactly ``length`` symbols ends in, from the start."""
    reached = {machine.start}
    for _ in range(length):
        reached = set(machine.delta[sorted(reached)].ravel().tolist())
    return sorted(reached)


def symmetric_group_s3() -> Semiautomaton:
    """S_3 acting on itself by ``state ∘ input`` (see the module docstring for the convention)."""
    elements = list(itertools.permutations(range(3)))
    index = {perm: i for i, perm in enumerate(elements)}
    delta = np.array([[index[tuple(s[x] for x in g)] for g in elements] for s in elements], dtype=np.int32)
    names = tuple("".join(map(str, perm)) for perm in elements)
    rule = (
        "elements of S_3 in one-line notation (p = p(0)p(1)p(2)); start at the identity 012; "
        "state_t = state_(t-1) ∘ input_t, i.e. state_t[x] = state_(t-1)[input_t[x]]"
    )
    return Semiautomaton("s3", names, names, index[(0, 1, 2)], delta, rule)


def _check_tokens(values: Any, what: str, where: str) -> tuple[str, ...]:
    if not isinstance(values, list) or not values:
        raise ValueError(f"{where}: '{what}' must be a non-empty list of strings, got {values!r}.")
    for value in values:
        if not isinstance(value, str) or not value or re.search(r"\s", value) or "||" in value or value == "####":
            raise ValueError(f"{where}: {what} entry {value!r} is not a token; use non-empty strings without spaces.")
    duplicates = sorted({v for v in values if values.count(v) > 1})
    if duplicates:
        raise ValueError(f"{where}: '{what}' lists {duplicates} more than once; each must be distinct.")
    return tuple(values)


def table_semiautomaton(spec: Any, where: str = "semiautomaton table") -> Semiautomaton:
    """A semiautomaton from its table (the parsed JSON); ``where`` names it in error messages.

    Raises:
        ValueError: a key is missing or unknown, states/inputs are not distinct tokens, the start or a next state is
            not a listed state, or a transition is missing or names an unknown state or input.
    """
    if not isinstance(spec, dict) or set(spec) != set(TABLE_KEYS):
        keys = sorted(spec) if isinstance(spec, dict) else type(spec).__name__
        raise ValueError(f"{where} has keys {keys}; a table is an object with exactly {', '.join(TABLE_KEYS)}.")
    states = _check_tokens(spec["states"], "states", where)
    if len(states) < 2:  # as for a counter of modulus 1: the answer would be the same for every question
        raise ValueError(
            f"{where}: 'states' lists the one state {states[0]!r}; a semiautomaton needs at least 2 states, else "
            "every answer is the same."
        )
    inputs = _check_tokens(spec["inputs"], "inputs", where)
    if spec["start"] not in states:
        raise ValueError(f"{where}: start state {spec['start']!r} is not one of the states {list(states)}.")
    transitions = spec["transitions"]
    if not isinstance(transitions, dict):
        raise ValueError(f"{where}: 'transitions' must map each state to {{input: next_state}}.")
    unknown = sorted(set(transitions) - set(states))
    missing = [s for s in states if s not in transitions]
    if unknown or missing:
        raise ValueError(
            f"{where}: transitions name unknown states {unknown} and lack states {missing}; give each state once."
        )
    state_id = {s: i for i, s in enumerate(states)}
    delta = np.empty((len(states), len(inputs)), dtype=np.int32)
    for s in states:
        row = transitions[s]
        if not isinstance(row, dict) or set(row) != set(inputs):
            got = sorted(row) if isinstance(row, dict) else row
            raise ValueError(f"{where}: transitions[{s!r}] has inputs {got}; it must give exactly {list(inputs)}.")
        for j, i in enumerate(inputs):
            if row[i] not in state_id:
                raise ValueError(f"{where}: transitions[{s!r}][{i!r}] = {row[i]!r} is not one of the states.")
            delta[state_id[s], j] = state_id[row[i]]
    rule = "state_t = transitions[state_(t-1)][input_t], from the table stated below"
    return Semiautomaton(where, states, inputs, state_id[spec["start"]], delta, rule)


def load_table(path: str | Path) -> Semiautomaton:
    """Read and validate a table file (see :func:`table_semiautomaton`).

    Raises:
        ValueError: the file cannot be read, is not JSON, or is not a valid table.
    """
    path = Path(path)
    try:
        spec = json.loads(path.read_text())
    except OSError as error:
        raise ValueError(
            f"table_path {str(path)!r} cannot be read ({error.strerror}); give a JSON table file."
        ) from None
    except json.JSONDecodeError as error:
        raise ValueError(f"table_path {str(path)!r} is not valid JSON ({error.msg} at line {error.lineno}).") from None
    return table_semiautomaton(spec, where=f"table {path.name}")


@dataclass(frozen=True)
class InputLaw:
    """A biased law for one out-of-distribution split: one probability per input symbol."""

    split: str
    probabilities: tuple[float, ...]
    description: str


@dataclass
class Params:
    """What a semiautomaton dataset is built from."""

    kind: str = field(
        default="counter",
        metadata={"help": "Semiautomaton: 'counter', 'cyclic' (C_n on itself), 's3' or 'table'.", "choices": KINDS},
    )
    modulus: int = field(default=2, metadata={"help": "States of C_n (>= 2; counter and cyclic only)."})
    table_path: str = field(default="", metadata={"help": "JSON table file (table only)."})
    length: int = field(default=32, metadata={"help": "Input symbols per question T (>= 1); also the CoT's states."})
    states_per_step: int = field(
        default=1,
        metadata={
            "help": "States per CoT step (>= 1, dividing length): the T states cut into steps of this many, the "
            "tokens unchanged (e.g. 4 gives Coconut 8 steps to replace at T = 32)."
        },
    )
    train_size: int = field(default=100_000, metadata={"help": "Examples in the train split (>= 1)."})
    test_size: int = field(default=1_000, metadata={"help": "Examples in the uniform test split (>= 1)."})
    ood_size: int = field(default=1_000, metadata={"help": "Examples in each test_ood_* split (>= 1)."})
    ood_p: list[float] = field(
        default_factory=lambda: [0.1, 0.9],
        metadata={
            "help": "Counter only (ignored otherwise): one test_ood_p<p> split per increment probability p in (0, 1)."
        },
    )
    ood_weights: list[str] = field(
        default_factory=list,
        metadata={
            "help": "One test_ood_<name> split per 'name=w1,w2,...' (one weight >= 0 per input, in input order)."
        },
    )
    seed: int = field(default=0, metadata={"help": "Random seed (>= 0); same seed, same rows."})

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"kind={self.kind!r} is unknown; allowed: {', '.join(KINDS)}.")
        if self.kind in ("counter", "cyclic") and (not isinstance(self.modulus, int) or self.modulus < 2):
            raise ValueError(f"modulus={self.modulus!r} is not allowed; C_n needs at least 2 states.")
        if self.kind == "table" and not self.table_path:
            raise ValueError("kind='table' needs table_path, the JSON file of the semiautomaton.")
        if self.kind != "table" and self.table_path:
            raise ValueError(f"table_path={self.table_path!r} is only used with kind='table', not {self.kind!r}.")
        if not isinstance(self.length, int) or self.length < 1:
            raise ValueError(f"length={self.length!r} is not allowed; a question needs at least 1 input symbol.")
        if not isinstance(self.states_per_step, int) or self.states_per_step < 1 or self.length % self.states_per_step:
            raise ValueError(
                f"states_per_step={self.states_per_step!r} is not allowed; use an integer >= 1 that divides "
                f"length={self.length}."
            )
        for name in ("train_size", "test_size", "ood_size"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"{name}={value!r} is not allowed; each split needs at least 1 example.")
        if not isinstance(self.seed, int) or self.seed < 0:
            raise ValueError(f"seed={self.seed!r} is not allowed; use an integer >= 0.")
        machine = self.semiautomaton()
        answers = final_states(machine, self.length)
        if len(answers) < 2:
            raise ValueError(
                f"{machine.name}: every input sequence of length {self.length} ends in state "
                f"{machine.states[answers[0]]!r}, so every answer would be the same; give a table in which inputs "
                "of that length lead to at least 2 different states."
            )
        laws = self.ood_laws(machine)
        total = self.train_size + self.test_size + self.ood_size * len(laws)
        available = len(machine.inputs) ** self.length
        if total > available:
            raise ValueError(
                f"{total} examples were asked for but only {available} distinct input sequences of length "
                f"{self.length} exist; ask for at most that many."
            )

    def semiautomaton(self) -> Semiautomaton:
        if self.kind == "counter":
            return cyclic_counter(self.modulus)
        if self.kind == "cyclic":
            return cyclic_group(self.modulus)
        if self.kind == "s3":
            return symmetric_group_s3()
        return load_table(self.table_path)

    def ood_laws(self, machine: Semiautomaton) -> list[InputLaw]:
        """The biased input laws, one per ``test_ood_*`` split, in order.

        Raises:
            ValueError: a p outside (0, 1), a malformed or misnamed weight spec, a wrong number of weights, weights
                not >= 0 or all zero, or two splits with the same name.
        """
        laws = []
        if self.kind == "counter":
            for p in self.ood_p:
                if not isinstance(p, (int, float)) or not 0 < p < 1:
                    raise ValueError(f"ood_p value {p!r} is not allowed; an increment probability lies in (0, 1).")
                name = "p" + re.sub(r"[^A-Za-z0-9]", "_", repr(float(p)))
                laws.append(InputLaw(f"test_ood_{name}", (1 - p, p), f"increments ~ Bernoulli({p})"))
        for spec in self.ood_weights:
            laws.append(_weights_law(spec, machine.inputs))
        names = [law.split for law in laws]
        repeated = sorted({n for n in names if names.count(n) > 1})
        if repeated:
            raise ValueError(f"out-of-distribution splits {repeated} are given twice; name each split once.")
        return laws

    def config_name(self) -> str:
        grouped = f"_s{self.states_per_step}" if self.states_per_step != 1 else ""
        if self.kind in ("counter", "cyclic"):
            return f"{self.kind}_c{self.modulus}_t{self.length}{grouped}"
        if self.kind == "s3":
            return f"s3_t{self.length}{grouped}"
        stem = re.sub(r"[^A-Za-z0-9]+", "_", Path(self.table_path).stem).strip("_") or "custom"
        return f"table_{stem}_t{self.length}{grouped}"


def _weights_law(spec: str, inputs: tuple[str, ...]) -> InputLaw:
    name, sep, weights_text = spec.partition("=")
    if not sep or not NAME_PATTERN.fullmatch(name):
        raise ValueError(f"ood_weights entry {spec!r} is not 'name=w1,w2,...' with a name of letters, digits and _.")
    try:
        weights = [float(w) for w in weights_text.split(",")]
    except ValueError:
        raise ValueError(f"ood_weights entry {spec!r} has a weight that is not a number.") from None
    if len(weights) != len(inputs):
        raise ValueError(
            f"ood_weights entry {spec!r} has {len(weights)} weights; give one per input ({len(inputs)}: {' '.join(inputs)})."
        )
    if any(not math.isfinite(w) or w < 0 for w in weights) or sum(weights) == 0:
        raise ValueError(f"ood_weights entry {spec!r} is not allowed; weights must be finite, >= 0 and not all zero.")
    probabilities = tuple(w / sum(weights) for w in weights)
    description = "inputs drawn with weights " + ", ".join(f"{i}: {w:g}" for i, w in zip(inputs, weights))
    return InputLaw(f"test_ood_{name}", probabilities, description)


def render_rows(rows: np.ndarray, machine: Semiautomaton, states_per_step: int = 1) -> dict[str, pa.Array]:
    """The ``question``, ``cot`` and ``answer`` columns for ``(n, T)`` input ids (``states_per_step`` states a step)."""
    states = machine.run(rows)
    return {
        "question": text_column(rows, machine.inputs),
        "cot": steps_column(states, machine.states, [states_per_step] * (rows.shape[1] // states_per_step)),
        "answer": text_column(states[:, -1:], machine.states),
    }


def features() -> datasets.Features:
    return example_features()


def build(params: Params, progress: bool = False) -> datasets.DatasetDict:
    """Splits ``train``, ``test`` and one ``test_ood_*`` per biased law, disjoint in input sequences."""
    machine = params.semiautomaton()
    space = RowSpace.uniform(params.length, len(machine.inputs))
    test_rows, train_rows = draw_distinct(
        space, [params.test_size, params.train_size], np.random.default_rng([params.seed, 0]), what="input sequences"
    )
    blocks = {"train": train_rows, "test": test_rows}
    used = np.concatenate([space.keys(test_rows), space.keys(train_rows)])
    for law in params.ood_laws(machine):
        # Each law has its own stream, keyed by its split name, so reordering the laws changes only the exclusions.
        rng = np.random.default_rng([params.seed, 2, zlib.crc32(law.split.encode())])
        (rows,) = draw_distinct(
            space,
            [params.ood_size],
            rng,
            exclude=used,
            probabilities=np.array(law.probabilities),
            what="input sequences",
        )
        blocks[law.split] = rows
        used = np.concatenate([used, space.keys(rows)])
    feats = features()
    # The table file's content, not just its path, decides the rows.
    identity = {**asdict(params), "machine": [machine.states, machine.inputs, machine.start, machine.delta.tolist()]}
    if params.states_per_step == 1:
        del identity["states_per_step"]  # the rows of every dataset built before the option existed
    return build_splits(
        blocks,
        lambda chunk: render_rows(chunk, machine, params.states_per_step),
        feats,
        TASK_NAME,
        GENERATOR_VERSION,
        identity,
        progress,
    )


def card_details(params: Params) -> dict[str, str]:
    """Facts the dataset card states beyond the description: the machine, its convention and the OOD laws."""
    machine = params.semiautomaton()
    details = {
        "semiautomaton": machine.name,
        "states": " ".join(machine.states),
        "inputs": " ".join(machine.inputs),
        "start state": machine.states[machine.start],
        "transition rule": machine.rule,
        "input length": str(params.length),
    }
    if params.states_per_step != 1:
        details["CoT steps"] = f"{params.length // params.states_per_step} steps of {params.states_per_step} states"
    if params.kind == "table":
        table = {
            s: dict(zip(machine.inputs, (machine.states[t] for t in row)))
            for s, row in zip(machine.states, machine.delta)
        }
        details["transition table"] = json.dumps(table)
    laws = "; ".join(f"{law.split}: {law.description}" for law in params.ood_laws(machine))
    details["splits"] = (
        "train, test: inputs uniform" + (f"; {laws}" if laws else "") + "; all disjoint in input sequences"
    )
    details["seed"] = str(params.seed)
    return details
