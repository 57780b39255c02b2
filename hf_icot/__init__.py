"""hf_icot: implicit chain of thought on Hugging Face."""

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
