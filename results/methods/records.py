"""What the methods league reads from a run's records beside its scores."""

from __future__ import annotations


def resumed(run: dict) -> bool:
    """Whether the run's last training leg began after step 0 (resumed from a checkpoint), so that its harness wall
    time covers that leg only: the Trainer's closing row times the steps of the leg it ran."""
    end = next((row for row in reversed(run["log"]) if "train_runtime" in row), None)
    if end is None or "train_steps_per_second" not in end:
        return False
    return end["train_runtime"] * end["train_steps_per_second"] < 0.99 * end["step"]


def training_passes(run: dict) -> float | None:
    """Decoder passes per training example over the run: the mean of its logged ``cot/forward_passes`` (one value per
    logging window, windows of equal steps); None for a run recorded before hf_icot logged them."""
    values = [row["cot/forward_passes"] for row in run["log"] if "cot/forward_passes" in row]
    return sum(values) / len(values) if values else None
