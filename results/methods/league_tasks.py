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
    "coconut_published": ("Coconut, its run.py's protocol (the optimizer reset at every epoch)", "latent"),
    "codi_published": ("CODI, its scripts' settings (projection, std-divided distillation)", "latent"),
    "simcot_coconut": ("SIM-CoT on Coconut (step supervision; Coconut's run.py protocol)", "latent"),
    "simcot_codi": ("SIM-CoT on CODI (step supervision; CODI's scripts' settings)", "latent"),
    "pccot": ("PCCoT (Jacobi-iterated continuous thoughts)", "latent"),
    "coconut_t6": ("Coconut, 6 thoughts (c = 2; the thoughts sweep)", "latent"),
    "coconut_t12": ("Coconut, 12 thoughts (c = 4; the thoughts sweep)", "latent"),
    "simcot_coconut_t6": ("SIM-CoT on Coconut, 6 thoughts (the thoughts sweep)", "latent"),
    "simcot_coconut_t12": ("SIM-CoT on Coconut, 12 thoughts (the thoughts sweep)", "latent"),
    "codi_t6": ("CODI, 6 thoughts (its scripts' settings; the thoughts sweep)", "latent"),
    "codi_t12": ("CODI, 12 thoughts (its scripts' settings; the thoughts sweep)", "latent"),
    "simcot_codi_t6": ("SIM-CoT on CODI, 6 thoughts (the thoughts sweep)", "latent"),
    "simcot_codi_t12": ("SIM-CoT on CODI, 12 thoughts (the thoughts sweep)", "latent"),
    "coconut_t16": ("Coconut, 16 thoughts (c = 2; the thoughts sweep)", "latent"),
    "simcot_coconut_t16": ("SIM-CoT on Coconut, 16 thoughts (the thoughts sweep)", "latent"),
    "codi_t16": ("CODI, 16 thoughts (its scripts' settings; the thoughts sweep)", "latent"),
    "simcot_codi_t16": ("SIM-CoT on CODI, 16 thoughts (the thoughts sweep)", "latent"),
    "full_cot": ("full CoT (answered with its CoT)", "explicit"),
    "e2e": ("end to end (no CoT ever)", "implicit"),
}
INTERNALIZING = ("stepwise", "adaptive", "mixture", "coconut", "codi")  # M0's candidates
PREMISE = "premise"  # a claim read by make_results.premise (M0), not by make_results.compare
STABLE = "stable"  # (STABLE, method): a claim read by make_results.stability (M4)
STEP_COST = "step cost"  # a claim read by results.methods.step_cost (P2), not from the league's runs
THOUGHTS = "thoughts"  # a claim read by results.methods.thoughts (T0, T1: the thoughts sweep)
#: The published-protocol rows (issue 51) and SIM-CoT's and PCCoT's (issue 53) are read over 5 seeds; the others over
#: 3 as registered.
SEEDS_OF = {"coconut_published": 5, "codi_published": 5, "simcot_coconut": 5, "simcot_codi": 5, "pccot": 5}


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
    claims: dict[
        str, str | tuple[str, str]
    ]  # claim id -> PREMISE, STEP_COST, THOUGHTS, (STABLE, method), or (first, second): d = first - second
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
            "M1-published-parity4": ("coconut_published", "stepwise"),
            "M2-published-parity4": ("codi_published", "coconut_published"),
            "M3-published-parity4": ("codi_published", "full_cot"),
            "M4-parity4": (STABLE, "codi_published"),
            "S1-parity4": ("simcot_coconut", "coconut_published"),
            "S2-parity4": ("simcot_codi", "codi_published"),
            "P1-parity4": ("pccot", "coconut_published"),
            "P2-parity4": STEP_COST,
            "T0-coconut": THOUGHTS,
            "T1-coconut": THOUGHTS,
            "T0-codi": THOUGHTS,
            "T1-codi": THOUGHTS,
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
            "M1-published-counter7": ("coconut_published", "stepwise"),
            "M2-published-counter7": ("codi_published", "coconut_published"),
            "M3-published-counter7": ("codi_published", "full_cot"),
            "M4-counter7": (STABLE, "codi_published"),
            "S1-counter7": ("simcot_coconut", "coconut_published"),
            "S2-counter7": ("simcot_codi", "codi_published"),
            "P1-counter7": ("pccot", "coconut_published"),
            "T0-counter7-coconut": THOUGHTS,
            "T1-counter7-coconut": THOUGHTS,
            "T0-counter7-codi": THOUGHTS,
            "T1-counter7-codi": THOUGHTS,
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
