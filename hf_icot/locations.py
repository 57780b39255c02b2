"""Where a dataset or model name points: a Hub repo id or a local folder. The rule loading (data, models) and
publishing (cards, pushes) share, kept here at the bottom of the rooms so that none of them imports upward for it."""

from __future__ import annotations

import os


def is_hub_id(name: str | None) -> bool:
    """Whether ``name`` reads as a Hub repo id (``name`` or ``owner/name``) rather than a local path or a label.

    An existing local path is never a Hub id, even when it is spelled like one (``gpt2`` with a ``gpt2/`` folder
    here): that is what ``from_pretrained`` would load. Otherwise the Hub client's own rule decides
    (``huggingface_hub.utils.validate_repo_id``), so labels such as ``datasets_builder:multiplication``, paths such
    as ``./gpt2`` or ``a/b/c``, and names the Hub refuses (``a--b``, ``name.git``) are not ids.
    """
    from huggingface_hub.errors import HFValidationError
    from huggingface_hub.utils import validate_repo_id

    if not name or os.path.exists(name):
        return False
    try:
        validate_repo_id(name)
    except HFValidationError:
        return False
    return True


def names_a_missing_folder(name: str) -> bool:
    """Whether ``name`` is meant as a local folder (``./x``, ``/x``, ``~/x``, ``a/b/c``: a Hub id is ``name`` or
    ``owner/name``) that does not exist, so that loading it can fail with one sentence before anything is tried."""
    looks_local = name.startswith((".", "/", "~")) or name.count("/") > 1
    return looks_local and not os.path.isdir(name)
