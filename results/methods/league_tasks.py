"""The methods league's tasks and methods (results/methods/make_results.py reads them): what each method is called,
the mode it answers in, and per task the claims read on it and the methods it takes from another study's records."""

from __future__ import annotations

from dataclasses import dataclass, field

METHODS = {  # method (runs.yaml) -> (what the table calls it, the mode it answers in)
    "stepwise": ("stepwise removal", "implicit"),
    "adaptive": ("adaptive pace (answer-token accuracy)", "implicit"),
    "mixture": ("mixture", "implicit"),
    "coconut": ("Coconut (continuous thoughts)", "latent"),
    "codi": ("CODI (self-distilled continuous thoughts)", "latent"),
    "full_cot": ("full CoT (answered with its CoT)", "explicit"),
    "e2e": ("end to end (no CoT ever)", "implicit"),
}
INTERNALIZING = ("stepwise", "adaptive", "mixture", "coconut", "codi")  # M0's candidates
PREMISE = "premise"  # a claim read by make_results.premise (M0), not by make_results.compare


@dataclass(frozen=True)
class Borrowed:
    """A method a task reads from another study's records: ``<studies>/<study>/runs/<run>_s<seed>``."""

    study: str
    run: str
    mode: str


@dataclass(frozen=True)
class Task:
    """One task of the league: how its methods are named and measured, and the claims read on it."""

    name: str
    measured: str  # what the curves measure, for the notes and the plot's axis
    claims: dict[str, str | tuple[str, str]]  # claim id -> PREMISE, or (first, second): d = first's mean - second's
    labels: dict[str, str] = field(default_factory=dict)  # method -> how this task's table names it (else METHODS)
    borrowed: dict[str, Borrowed] = field(default_factory=dict)


TASKS = {
    "parity4": Task(
        "parity4",
        "every 100 steps, 200 validation questions",
        {
            "M0-parity4": PREMISE,
            "M1-coconut-stepwise": ("coconut", "stepwise"),
            "M2-codi-coconut": ("codi", "coconut"),
            "M3-codi-fullcot": ("codi", "full_cot"),
        },
        labels={"stepwise": "stepwise removal (the quickstart's pace)", "mixture": "mixture (removed tokens dropped)"},
    ),
    "counter7": Task(
        "counter7",
        "every 250 steps, the first 100 test questions",
        {
            "M0-counter7": PREMISE,
            "M1-counter7": ("coconut", "stepwise"),
            "M2-counter7": ("codi", "coconut"),
            "M3-counter7": ("codi", "full_cot"),
        },
        labels={
            "stepwise": "stepwise removal (R2's left curriculum; semiautomata records)",
            "mixture": "mixture (length hints, answered at hint 0; semiautomata records)",
            "full_cot": "full CoT (answered with its CoT; semiautomata records, 3,000 steps)",
        },
        borrowed={
            "stepwise": Borrowed("semiautomata", "claim_counter7_t32_left", "implicit"),
            "mixture": Borrowed("semiautomata", "claim_counter7_t32_mixture", "hint=0"),
            "full_cot": Borrowed("semiautomata", "regime_counter7_t32_full_cot", "explicit"),
        },
    ),
}
