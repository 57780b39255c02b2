"""Jinja templates for the dataset and model cards hf_icot publishes, shipped as package data.

``render("dataset_card.md.j2", **context)`` fills a template with ``context``. Undefined names raise instead of
rendering as empty text, so a card can never silently lose a field.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jinja2

TEMPLATE_DIR = Path(__file__).parent

_ENVIRONMENT = jinja2.Environment(
    loader=jinja2.FileSystemLoader(TEMPLATE_DIR),
    undefined=jinja2.StrictUndefined,
    keep_trailing_newline=True,
    trim_blocks=True,
    lstrip_blocks=True,
    autoescape=False,  # Markdown, not HTML: escaping would corrupt code blocks and YAML
)


def render(template_name: str, **context: Any) -> str:
    """Render the template ``template_name`` (a file in this package, e.g. ``"dataset_card.md.j2"``) with ``context``.

    Raises:
        ValueError: no such template (the message lists the ones that exist).
        jinja2.UndefinedError: the template uses a name missing from ``context``.
    """
    try:
        template = _ENVIRONMENT.get_template(template_name)
    except jinja2.TemplateNotFound:
        available = sorted(path.name for path in TEMPLATE_DIR.glob("*.j2"))
        raise ValueError(
            f"card template {template_name!r} does not exist; available: {', '.join(available)}."
        ) from None
    return template.render(**context)
