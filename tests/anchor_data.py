"""Where the stepwise reference's own data files are: ``HF_ICOT_ANCHOR_DATA`` if set, else
``../shared/anchor-data/internalize_cot_step_by_step`` beside the repository (the workplace's layout, which CI's
clean clone keeps). Tests that read them fail with one sentence naming the folder when it is missing."""

import os
from pathlib import Path

ANCHOR = Path(
    os.environ.get("HF_ICOT_ANCHOR_DATA")
    or Path(__file__).resolve().parents[2] / "shared" / "anchor-data" / "internalize_cot_step_by_step"
)


def missing_anchor_message() -> str:
    return (
        f"the stepwise reference's anchor files are expected under {ANCHOR}: clone the repository beside shared/ "
        "or set HF_ICOT_ANCHOR_DATA to the folder that holds 4_by_4_mult/ ... gsm8k/"
    )
