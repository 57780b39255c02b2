"""The push faults both pushes (``python -m hf_icot.publishing.hub push`` for models, ``python -m datasets_builder push`` for
datasets) are tested against, and what huggingface_hub 2.4 itself does about each one.

huggingface_hub sends the pre-upload call, the LFS batch call and the LFS PUT through ``http_backoff``, which retries
HTTP 408/429/500/502/503/504 and dropped connections 5 times (6 tries), sleeping 1, 2, 4, 8, 8 s between them, or
``Retry-After`` + 1 s when the answer carries one. ``create_repo`` and the commit are sent once: the commit is not
idempotent, so even a 429 or a 500 there is final. A fault of a retried call is therefore made to last for every try
(a single one is absorbed by the client: see ``TRANSIENT``), and the :func:`backoff_waits` fixture records the sleeps
instead of sleeping them.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace

import pytest

from tests.hub_server import FailureRule, LoopbackHub

#: What huggingface_hub sleeps between the 6 tries of a retried call without ``Retry-After``.
BACKOFF = [1, 2, 4, 8, 8]
ENDPOINTS = {
    "create_repo": r"^POST /api/repos/create$",
    "preupload": r"^POST /api/{kind}/[^ ]+/preupload/",
    "lfs_upload": r"^PUT /lfs-upload/",
    "commit": r"^POST /api/{kind}/[^ ]+/commit/",
}


@dataclass(frozen=True)
class PushFault:
    """A fault at one Hub endpoint, lasting until the Hub recovers, and what the client and our message make of it.

    ``status`` None drops the connection half-way through the request. ``tries`` is how many requests the client
    sends to ``endpoint`` in one push before giving up, ``waits`` what it sleeps between them, and ``reason`` a regex
    of the clause :func:`hf_icot.publishing.hub.describe_push_failure` gives (``{url}`` is the Hub's address).
    """

    name: str
    status: int | None
    endpoint: str
    tries: int
    waits: list[float]
    reason: str
    headers: dict[str, str] = field(default_factory=dict)

    def arm(self, hub: LoopbackHub, kind: str, times: int | None = None) -> FailureRule:
        """Inject the fault into ``hub`` for repos of ``kind`` (``"models"`` or ``"datasets"``)."""
        match = ENDPOINTS[self.endpoint].format(kind=kind)
        return hub.fail(self.status, match, times=times, headers=self.headers)  # type: ignore[arg-type]

    def clause(self, url: str) -> str:
        return self.reason.format(url=re.escape(url))


def _answered(status: int) -> str:
    return rf"the Hub at {{url}} answered HTTP {status} \(injected failure {status} for [^)]+\)"


FAULTS = [
    PushFault("500 at pre-upload", 500, "preupload", 6, BACKOFF, _answered(500)),
    PushFault("500 at LFS upload", 500, "lfs_upload", 6, BACKOFF, _answered(500)),
    PushFault("500 at commit", 500, "commit", 1, [], _answered(500)),
    PushFault(
        "connection dropped mid-upload",
        None,
        "lfs_upload",
        6,
        BACKOFF,
        r"the connection to the Hub at {url} broke off mid-request \((RemoteProtocolError|ReadError|WriteError)\)",
    ),
    PushFault(
        "401 at repo creation",
        401,
        "create_repo",
        1,
        [],
        r"the Hub at {url} refused the token \(HTTP 401\); check with `hf auth whoami` that it may write to \S+",
    ),
    PushFault(
        "403 at pre-upload",
        403,
        "preupload",
        1,
        [],
        r"the Hub at {url} refused the token \(HTTP 403\); check with `hf auth whoami` that it may write to \S+",
    ),
    PushFault(
        "429 at pre-upload, Retry-After 3",
        429,
        "preupload",
        6,
        [4, 4, 4, 4, 4],
        r"the Hub at {url} rate-limited the upload \(HTTP 429\) and asks to wait 3 s",
        {"Retry-After": "3"},
    ),
    PushFault(
        "429 at commit, Retry-After 3",
        429,
        "commit",
        1,
        [],
        r"the Hub at {url} rate-limited the upload \(HTTP 429\) and asks to wait 3 s",
        {"Retry-After": "3"},
    ),
]
FAULT_BY_NAME = {fault.name: fault for fault in FAULTS}
#: The faults huggingface_hub retries: once only, they never reach the caller.
TRANSIENT = [fault for fault in FAULTS if fault.tries > 1]


def file_hashes(folder: Path) -> dict[str, str]:
    """Relative path -> sha256 of every file under ``folder``, hidden files and subfolders included."""
    return {
        path.relative_to(folder).as_posix(): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(folder.rglob("*"))
        if path.is_file()
    }


@pytest.fixture
def backoff_waits(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[float]]:
    """The sleeps huggingface_hub's ``http_backoff`` asks for in this process, recorded instead of slept."""
    from huggingface_hub.utils import _http

    waits: list[float] = []
    monkeypatch.setattr(_http, "time", SimpleNamespace(sleep=waits.append))
    yield waits
