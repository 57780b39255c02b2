"""The methods league's table: its columns, how a row of :func:`results.methods.make_results.points` reads in them,
and the notes printed under it (split from ``make_results.py``)."""

from __future__ import annotations

from pathlib import Path

from hf_icot.studies.report import write_table
from hf_icot.studies.statistics import Summary
from results.methods import step_seconds
from results.methods.league_tasks import METHODS, TASKS

COST = "forward passes / answer (1 per latent thought or generated token)"
TRAIN_PASSES = "forward passes / training example (logged, mean over the run)"
STEP_MS = "ms per training step (quiet, at its last stage)"


def _cell(summary: Summary | None, digits: int) -> str:
    return "" if summary is None else summary.text(digits)


def label(task: str, method: str) -> str:
    return TASKS[task].labels.get(method, METHODS[method][0])


def table_rows(rows: list[dict], seconds: dict | None = None) -> list[dict]:
    """The table's rows; ``seconds``: :func:`step_seconds.read`'s measurements (None: none)."""
    out = []
    for row in rows:
        n, reached = len(row["runs"]), row["reached"]
        if not row["measured"]:
            examples = steps = "not measured (evaluated at the end only)"
        elif row["to_bar"] is not None:
            examples, steps = _cell(row["to_bar"], 0), _cell(row["steps_to_bar"], 0)
        elif reached:
            examples = f"{len(reached)}/{n} seeds reached it ({', '.join(f'{e:,.0f}' for e, _ in reached)})"
            steps = f"{len(reached)}/{n} seeds ({', '.join(f'{s:,}' for _, s in reached)})"
        else:
            examples, steps = f"not reached in {row['trained']:,.0f}", "not reached"
        low, high = (f"{f(row['wall']):,.0f}" for f in (min, max)) if row["wall"] else ("", "")
        wall = "—" if not low else f"{low} s" if low == high else f"{low}–{high} s"
        if row["resumed"]:
            wall += f" ({row['resumed']} resumed run(s) left out: timed from the resumption)"
        out.append(
            {
                "task": row["task"],
                "method": label(row["task"], row["method"]),
                "mode": row["runs"][0]["mode"],
                "seeds": n,
                "test EM, own mode (end)": _cell(row["final"], 3),
                "examples to ≥ 90%": examples,
                "steps to ≥ 90%": steps,
                "wall time per run": wall,
                "late evaluations ≥ 90% (per seed)": " ".join("—" if v is None else f"{v:.2f}" for v in row["late"]),
                "CPU": "; ".join(row["cpus"]),
                STEP_MS: step_seconds.cell(seconds or {}, row["task"], row["method"]),
                TRAIN_PASSES: _cell(row["train_passes"], 2),
                COST: _cell(row["cost"], 2),
                "tokens/s (test)": _cell(row["tokens_per_s"], 0),
                "examples/s (test)": _cell(row["examples_per_s"], 0),
            }
        )
    return out


def write_or_clear(rows: list[dict], out: Path, name: str, seconds: dict | None = None) -> str:
    """``rows`` as ``out/name.md`` / ``.csv``; for no rows, neither file (a stale one is removed) and ``""``."""
    if rows:
        return write_table(table_rows(rows, seconds), out, name)
    for suffix in (".md", ".csv"):
        (out / f"{name}{suffix}").unlink(missing_ok=True)
    return ""


NOTES = (
    "Each method answers in its own mode: implicit (no CoT) for token removal and end to end, latent for Coconut and "
    "CODI, explicit (writing its CoT) for full CoT, and on counter7 length hint 0 for the mixture (trained with "
    "length hints, its no-CoT mode). Examples and steps to ≥ 90%: the first held-out measurement at or above 90% "
    "(parity4: every 100 steps, 200 validation questions; counter7: every 250 steps, the first 100 test questions); "
    "the runs counter7 reads from the semiautomata study evaluated at the end only. Inference cost per test answer "
    "in decoder forward passes: a latent thought costs one forward pass, as a generated token does; for Coconut and "
    "CODI it is their latent thoughts plus the tokens they generate (`forward_passes`), for a token method the "
    "tokens it generates (tokens/s ÷ examples/s). Forward passes per training example: the decoder passes of a "
    "training step per example, as logged (`cot/forward_passes`, counted on the model's transformer and SIM-CoT's "
    "decoder; blank for runs recorded before it was logged). Milliseconds per training step: the row's command "
    "for seed 0 at its last stage, 60 steps, the median after 10, the median of 3 quiet rotated rounds (`python -m "
    "results.methods.step_seconds`, `step_seconds.json`; a token-removal row costs between end to end and full CoT as "
    "its CoT shrinks). The other speeds and the wall times are on this CPU beside another run: compare them roughly; "
    "a run the harness resumed from a checkpoint is timed from its resumption only, so its wall time is left out "
    "(and counted)."
)
