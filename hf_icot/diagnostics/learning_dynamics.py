"""One ``TrainerCallback`` for the learning-dynamics measurements of the "marginals before conditionals" study.

:class:`LearningDynamicsCallback` measures, on a fixed set of tokenized examples (see
:mod:`hf_icot.diagnostics.token_batches`), at the start of training, every ``interval`` steps and at the end:

========================  ==========================================================================================
measurement               columns (logged and written to the CSV)
========================  ==========================================================================================
``z_shuffle_gap``         ``z_shuffle_gap``, ``first_token_loss_clean``, ``first_token_loss_shuffled``
``candidate_loss``        ``candidate_loss``, ``candidate_accuracy``, ``candidate_log_k``
``group_accuracy``        ``groups_solved_fraction`` (the per-group vector goes to ``group_accuracy_path``)
``selector_attention``    ``attn_z_l{layer}h{head}`` for every layer and head
``head_ablation``         ``ablate_{zero,mean}_l{layer}h{head}`` for the chosen heads
Hessian                   ``hessian_top_{i}``, ``hessian_bottom_{i}`` (i = 1..k), every ``hessian_interval`` steps
========================  ==========================================================================================

The values go into the trainer's logs (``trainer.log``, so every reporting integration sees them) when a trainer is
given, else into ``state.log_history``; one CSV row per measured step (column ``step`` first) when ``csv_path`` is
set. Measurements run with dropout off and leave the model's mode, its attention implementation, its gradients and
the global random state as they were, so training follows the same trajectory with the callback as without. With
no measurement enabled the callback runs nothing. Under several processes only the main one measures and writes.

The rows measured so far ride in each checkpoint (an ``ExportableState``): a run resumed from step ``s`` continues
with the rows up to ``s`` and rewrites its CSV files from them, so its rows and files are the uninterrupted run's.
"""

from __future__ import annotations

import csv
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from transformers import TrainerCallback
from transformers.trainer_callback import ExportableState

from hf_icot.diagnostics import ablation, attention, candidates, hessian, z_shuffle
from hf_icot.diagnostics.token_batches import as_rows, require_columns
from hf_icot.runs.runtime import log_from_callback

MEASUREMENTS = ("z_shuffle_gap", "candidate_loss", "group_accuracy", "selector_attention", "head_ablation")

#: The measurements each direction cannot make: no selector in the question, or K candidates that coincide.
UNMEASURABLE = {
    "b_to_a": ("z_shuffle_gap", "selector_attention"),
    "az_to_b": ("candidate_loss",),
    "a_to_b": ("z_shuffle_gap", "selector_attention", "candidate_loss"),
}


def check_measurements(direction: str, measurements: list[str]) -> None:
    """Raise ValueError when ``measurements`` asks for one that ``direction`` cannot make (:data:`UNMEASURABLE`)."""
    refused = [m for m in measurements if m in UNMEASURABLE.get(direction, ())]
    if refused:
        kept = [m for m in measurements if m not in refused] or ["group_accuracy"]
        raise ValueError(
            f"direction {direction!r} cannot measure {', '.join(refused)} (no selector in its question, or K "
            f"candidates that coincide); give --measurements {' '.join(kept)}."
        )


class LearningDynamicsCallback(TrainerCallback, ExportableState):
    """Measure the learning dynamics on fixed examples during training (see the module docstring).

    Args:
        model: the model being trained (its shape fixes the per-head columns; measured is the model the trainer
            passes to the callback events, the same object).
        examples: tokenized examples (``datasets.Dataset`` or list of dicts) with ``input_ids``, ``labels`` and
            what the enabled measurements read: ``selector_positions`` (Δz, selector attention), ``group``
            (candidate loss, group accuracy).
        pad_token_id: the id batches are padded with (masked by ``attention_mask``).
        interval: steps between measurements (>= 1); also measured at train begin and at the end.
        measurements: any of :data:`MEASUREMENTS`; empty for none.
        hessian_interval: steps between Hessian measurements (>= 1), at train begin and at the end too (a step
            due for the Hessian measures the rest as well); None for no Hessian (it costs a few dozen double
            backward passes per end of the spectrum).
        hessian_examples: the fixed batch for the Hessian (default: ``examples``).
        hessian_k: eigenvalues per end of the spectrum.
        hessian_tol: Lanczos' relative tolerance on them (tighter costs more products; see
            :func:`~hf_icot.diagnostics.hessian.extreme_eigenvalues`).
        heads: (layer, head) pairs to ablate; None for every head.
        ablation_modes: any of ``"zero"``, ``"mean"``.
        solved_threshold: a group counts as solved at this accuracy or above.
        csv_path: CSV file for one row per measured step; None for none. A run starting at step 0 overwrites it,
            a resumed run rewrites it from the checkpoint's rows and appends to it.
        group_accuracy_path: CSV file for the per-group accuracies (``step`` then one column per group, sorted);
            None for none.
        trainer: when given, values are logged through ``trainer.log``; else appended to ``state.log_history``.
        seed: seeds the Δz derangement and the Lanczos start (the same at every measurement).
        batch_size: sequences per forward pass.

    Raises:
        ValueError: ``interval`` or ``hessian_interval`` < 1, an unknown measurement or ablation mode, examples
            without a column an enabled measurement reads, a head outside the model, ``hessian_k`` < 1,
            ``batch_size`` < 1, or the bad examples named by each measurement's check (fewer than 2 distinct
            selectors for Δz, answers of unequal lengths within a group for the candidate loss).
    """

    def __init__(
        self,
        model: Any,
        examples: Iterable[dict] | None,
        *,
        pad_token_id: int,
        interval: int,
        measurements: Sequence[str] = MEASUREMENTS,
        hessian_interval: int | None = None,
        hessian_examples: Iterable[dict] | None = None,
        hessian_k: int = 1,
        hessian_tol: float = 1e-4,
        heads: Sequence[tuple[int, int]] | None = None,
        ablation_modes: Sequence[str] = ablation.MODES,
        solved_threshold: float = 0.8,
        csv_path: str | Path | None = None,
        group_accuracy_path: str | Path | None = None,
        trainer: Any = None,
        seed: int = 0,
        batch_size: int = 64,
    ) -> None:
        if interval < 1:
            raise ValueError(f"interval={interval} is not allowed; measure at most every step (interval >= 1).")
        if hessian_interval is not None and hessian_interval < 1:
            raise ValueError(f"hessian_interval={hessian_interval} is not allowed; give >= 1, or None for none.")
        unknown = [m for m in measurements if m not in MEASUREMENTS]
        if unknown:
            raise ValueError(f"measurement {unknown[0]!r} is unknown; allowed: {', '.join(MEASUREMENTS)}.")
        if batch_size < 1:
            raise ValueError(f"batch_size={batch_size} is not allowed; a forward pass takes at least 1 sequence.")
        if hessian_k < 1:
            raise ValueError(f"hessian_k={hessian_k} is not allowed; ask for at least 1 eigenvalue per end.")
        for mode in ablation_modes:
            if mode not in ablation.MODES:
                raise ValueError(f"ablation mode {mode!r} is unknown; allowed: {', '.join(ablation.MODES)}.")
        self.model, self.trainer, self.pad_token_id = model, trainer, pad_token_id
        self.interval, self.hessian_interval = interval, hessian_interval
        self.hessian_k, self.hessian_tol = hessian_k, hessian_tol
        self.measurements = tuple(dict.fromkeys(measurements))
        self.ablation_modes, self.solved_threshold = tuple(ablation_modes), solved_threshold
        self.csv_path = Path(csv_path) if csv_path is not None else None
        self.group_accuracy_path = Path(group_accuracy_path) if group_accuracy_path is not None else None
        self.seed, self.batch_size = seed, batch_size
        self.rows: list[dict[str, float]] = []  # every measured row, ``step`` included
        self.group_rows: list[dict[str, float]] = []  # the per-group accuracies of each measured step
        self._last_step: int | None = None
        self._files_started = False

        self.examples = as_rows(examples) if self.measurements else []
        if "z_shuffle_gap" in self.measurements:
            z_shuffle.check_examples(self.examples)
        if "candidate_loss" in self.measurements:
            candidates.check_candidate_examples(self.examples)
        if "group_accuracy" in self.measurements:
            candidates.check_group_examples(self.examples, solved_threshold)
        if "selector_attention" in self.measurements:
            attention.check_examples(self.examples)
        self.heads: list[tuple[int, int]] = []
        if "head_ablation" in self.measurements:
            require_columns(self.examples, [], "head_ablation")
            self.heads = ablation.check_heads(model, heads)
        self.hessian_examples: list[dict] = []
        if hessian_interval is not None:
            source = examples if hessian_examples is None else hessian_examples
            self.hessian_examples = as_rows(source) if source is not None else []
            require_columns(self.hessian_examples, [], "hessian")
        self.groups = sorted({row["group"] for row in self.examples}) if "group_accuracy" in self.measurements else []
        self.columns = self._columns()

    @property
    def enabled(self) -> bool:
        return bool(self.measurements) or self.hessian_interval is not None

    def _columns(self) -> list[str]:
        columns = ["step"]
        if "z_shuffle_gap" in self.measurements:
            columns += ["z_shuffle_gap", "first_token_loss_clean", "first_token_loss_shuffled"]
        if "candidate_loss" in self.measurements:
            columns += ["candidate_loss", "candidate_accuracy", "candidate_log_k"]
        if "group_accuracy" in self.measurements:
            columns += ["groups_solved_fraction"]
        if "selector_attention" in self.measurements:
            n_layers, n_heads = ablation.model_shape(self.model)
            columns += [f"attn_z_l{layer}h{head}" for layer in range(n_layers) for head in range(n_heads)]
        for mode in self.ablation_modes if "head_ablation" in self.measurements else ():
            columns += [f"ablate_{mode}_l{layer}h{head}" for layer, head in self.heads]
        if self.hessian_interval is not None:
            columns += [f"hessian_top_{i}" for i in range(1, self.hessian_k + 1)]
            columns += [f"hessian_bottom_{i}" for i in range(1, self.hessian_k + 1)]
        return columns

    # -- measuring -------------------------------------------------------------------------------------------------

    def measure(self, model: Any, with_hessian: bool) -> tuple[dict[str, float], list[float]]:
        """One row of values (without ``step``) and the per-group accuracies (empty when not measured)."""
        values: dict[str, float] = {}
        options = {"pad_token_id": self.pad_token_id, "batch_size": self.batch_size}
        if "z_shuffle_gap" in self.measurements:
            gap = z_shuffle.z_shuffle_gap(model, self.examples, seed=self.seed, **options)
            values.update(
                z_shuffle_gap=gap.gap,
                first_token_loss_clean=gap.clean_loss,
                first_token_loss_shuffled=gap.shuffled_loss,
            )
        if "candidate_loss" in self.measurements:
            scored = candidates.candidate_loss(model, self.examples, **options)
            values.update(
                candidate_loss=scored.loss, candidate_accuracy=scored.accuracy, candidate_log_k=scored.mean_log_k
            )
        per_group: list[float] = []
        if "group_accuracy" in self.measurements:
            groups = candidates.group_accuracy(model, self.examples, threshold=self.solved_threshold, **options)
            values["groups_solved_fraction"] = groups.solved_fraction
            per_group = groups.accuracy.tolist()
        if "selector_attention" in self.measurements:
            mass = attention.selector_attention(model, self.examples, **options)
            for (layer, head), value in _cells(mass):
                values[f"attn_z_l{layer}h{head}"] = value
        if "head_ablation" in self.measurements:
            increases = ablation.head_ablation(
                model, self.examples, heads=self.heads, modes=self.ablation_modes, **options
            )
            for mode, array in increases.items():
                for layer, head in self.heads:
                    values[f"ablate_{mode}_l{layer}h{head}"] = float(array[layer, head])
        if with_hessian:
            extremes = hessian.hessian_extremes(
                model,
                self.hessian_examples,
                pad_token_id=self.pad_token_id,
                k=self.hessian_k,
                tol=self.hessian_tol,
                seed=self.seed,
            )
            for i in range(self.hessian_k):
                values[f"hessian_top_{i + 1}"] = float(extremes.top[i])
                values[f"hessian_bottom_{i + 1}"] = float(extremes.bottom[i])
        return values, per_group

    def _record(self, state: Any, model: Any, with_hessian: bool) -> None:
        if not state.is_world_process_zero:
            return
        step = state.global_step
        values, per_group = self.measure(self.model if model is None else model, with_hessian)
        self._last_step = step
        self.rows.append({"step": step, **values})
        if self.trainer is not None:
            log_from_callback(self.trainer, dict(values))
        else:
            state.log_history.append({**values, "step": step})
        self._write(step, values, per_group)

    def _write(self, step: int, values: dict[str, float], per_group: list[float]) -> None:
        # A run from step 0 starts the files afresh; a resumed run continues the files its restore rewrote.
        mode = "a" if (self._files_started or step > 0) else "w"
        self._files_started = True
        if self.csv_path is not None:
            _append_row(self.csv_path, mode, self.columns, {"step": step, **values})
        if per_group:
            row = {"step": step, **dict(zip(self.groups, per_group, strict=True))}
            self.group_rows.append(row)
            if self.group_accuracy_path is not None:
                _append_row(self.group_accuracy_path, mode, ["step", *self.groups], row)

    # -- checkpoints -----------------------------------------------------------------------------------------------

    def state(self) -> dict[str, Any]:
        return {"args": {}, "attributes": {"rows": self.rows, "group_rows": self.group_rows}}

    def _restore(self, saved: dict[str, Any], step: int) -> None:
        """Continue from a checkpoint at ``step``: its rows (those measured after it, before a kill, are dropped)
        and the CSV files rewritten from them."""
        self.rows = [row for row in saved.get("rows", []) if row["step"] <= step]
        self.group_rows = [row for row in saved.get("group_rows", []) if row["step"] <= step]
        self._last_step = self.rows[-1]["step"] if self.rows else None
        for path, columns, rows in (
            (self.csv_path, self.columns, self.rows),
            (self.group_accuracy_path, ["step", *self.groups], self.group_rows),
        ):
            if path is not None and rows:
                for index, row in enumerate(rows):
                    _append_row(path, "w" if index == 0 else "a", columns, row)
        self._files_started = True

    # -- trainer events --------------------------------------------------------------------------------------------

    def on_train_begin(self, args, state, control, model=None, **kwargs):
        saved = (state.stateful_callbacks or {}).get(type(self).__name__)
        if state.global_step > 0:  # resumed: the measurements up to the checkpoint are its
            if saved and state.is_world_process_zero:
                self._restore(saved.get("attributes", {}), state.global_step)
            return
        if self.enabled:
            self._record(state, model, with_hessian=self.hessian_interval is not None)

    def on_step_end(self, args, state, control, model=None, **kwargs):
        if not self.enabled:
            return
        step = state.global_step
        hessian_due = self.hessian_interval is not None and step % self.hessian_interval == 0
        if (self.measurements and step % self.interval == 0) or hessian_due:
            self._record(state, model, with_hessian=hessian_due)

    def on_train_end(self, args, state, control, model=None, **kwargs):
        if self.enabled and self._last_step != state.global_step:
            self._record(state, model, with_hessian=self.hessian_interval is not None)


def _cells(array: Any) -> Iterable[tuple[tuple[int, int], float]]:
    for layer in range(array.shape[0]):
        for head in range(array.shape[1]):
            yield (layer, head), float(array[layer, head])


def _append_row(path: Path, mode: str, columns: list[str], row: dict[str, float]) -> None:
    """Write ``row`` under ``columns`` (blank where absent); a header when the file is new or rewritten.

    Raises:
        ValueError: appending to a file whose header is not ``columns`` (another measurement set).
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    exists = path.exists() and path.stat().st_size > 0
    if mode == "a" and exists:
        with path.open(newline="") as handle:
            header = next(csv.reader(handle), [])
        if header != columns:
            raise ValueError(
                f"{path} has the columns {header[:4]}...; this run writes {columns[:4]}...; give another csv path."
            )
    with path.open(mode, newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=columns, restval="")
        if mode == "w" or not exists:
            writer.writeheader()
        writer.writerow(row)
