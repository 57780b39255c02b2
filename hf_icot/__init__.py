"""hf_icot: implicit chain of thought on Hugging Face."""

# The schedule registry first: hf_icot.adaptive builds on hf_icot.schedules, which registers it at its end, so importing
# hf_icot.adaptive on its own must find hf_icot.schedules already loaded.
import hf_icot.schedules  # noqa: F401
from hf_icot.cot import (
    FULL_COT,
    PLACEHOLDER_TOKEN,
    MalformedLineError,
    TruncatedCoT,
    TruncationSpec,
    example_features,
    hint_token,
    parse_line,
    render_line,
    truncate,
    truncate_example,
)

__version__ = "0.1.0"

__all__ = [
    "FULL_COT",
    "PLACEHOLDER_TOKEN",
    "MalformedLineError",
    "TruncatedCoT",
    "TruncationSpec",
    "example_features",
    "hint_token",
    "parse_line",
    "render_line",
    "truncate",
    "truncate_example",
]
