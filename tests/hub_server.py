"""A loopback Hugging Face Hub for tests: a threaded HTTP server on 127.0.0.1 that keeps repos in memory.

It speaks the part of the Hub HTTP API that huggingface_hub 2.4 uses, with Xet disabled (``HF_HUB_DISABLE_XET=1``):

* ``create_repo`` / ``delete_repo`` / ``create_branch`` / ``whoami``;
* ``upload_folder`` / ``create_commit``: README YAML validation, ``preupload`` (regular or LFS mode per file), the
  LFS batch API with single-part PUT uploads and verify, and the ndjson ``commit`` call;
* ``repo_info`` (and ``dataset_info``/``model_info``), ``list_repo_files`` / ``list_repo_tree``, ``paths-info``;
* ``hf_hub_download`` through ``resolve`` (HEAD and GET, with ranges).

Use the :func:`loopback_hub` fixture (import it into a test module or conftest): it starts a server, points
huggingface_hub at it and yields the :class:`LoopbackHub`, whose ``files()`` tell what arrived, whose ``fail()``
injects HTTP errors (with headers such as ``Retry-After``), whose ``drop_connection()`` closes connections in the
middle of a request, and whose ``recover()`` removes both. Writes need ``Authorization: Bearer <hub.token>``; a wrong
token gets 401 everywhere.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, unquote

import pytest
import yaml

#: Files the loopback Hub stores through LFS, like the Hub's default .gitattributes (plus any file of 10 MB or more).
LFS_SUFFIXES = (
    ".parquet",
    ".arrow",
    ".safetensors",
    ".bin",
    ".pt",
    ".pth",
    ".ckpt",
    ".h5",
    ".onnx",
    ".msgpack",
    ".zip",
)
LFS_MIN_BYTES = 10 * 2**20
_TYPE_OF_PREFIX = {"datasets": "dataset", "spaces": "space", "kernels": "kernel"}
_PREFIX_OF_TYPE = {kind: f"{prefix}/" for prefix, kind in _TYPE_OF_PREFIX.items()} | {"model": ""}
_TIMESTAMP = "2026-01-01T00:00:00.000Z"


def git_blob_oid(content: bytes) -> str:
    """The git object id of a blob, which the Hub reports for regular (non-LFS) files."""
    return hashlib.sha1(b"blob %d\0" % len(content) + content).hexdigest()


@dataclass
class StoredFile:
    content: bytes
    lfs: bool

    @property
    def oid(self) -> str:
        """What preupload and tree listings report: sha256 for LFS files, the git blob id otherwise."""
        return hashlib.sha256(self.content).hexdigest() if self.lfs else git_blob_oid(self.content)


@dataclass
class Branch:
    commit: str
    files: dict[str, StoredFile] = field(default_factory=dict)
    messages: list[str] = field(default_factory=list)


@dataclass
class Repo:
    private: bool
    branches: dict[str, Branch]
    #: commit id -> the files as of that commit, so readers can pin a revision to a commit (as datasets does)
    snapshots: dict[str, dict[str, StoredFile]] = field(default_factory=dict)


@dataclass
class FailureRule:
    """Answer ``status`` (with ``headers``) to requests whose ``"METHOD /path"`` matches the regex ``match``, skipping
    the first ``after`` matching requests, ``times`` times (None: for ever). A ``status`` of None answers nothing: the
    server reads half of the request body and closes the connection."""

    status: int | None
    match: str = ""
    after: int = 0
    times: int | None = 1
    headers: dict[str, str] = field(default_factory=dict)
    seen: int = 0
    fired: int = 0

    def fires(self, request_line: str) -> bool:
        if not re.search(self.match, request_line):
            return False
        self.seen += 1
        if self.seen <= self.after or (self.times is not None and self.fired >= self.times):
            return False
        self.fired += 1
        return True


class HubError(Exception):
    def __init__(self, status: int, message: str, error_code: str | None = None, headers: dict | None = None):
        super().__init__(message)
        self.status, self.message, self.error_code, self.headers = status, message, error_code, headers or {}


class LoopbackHub:
    """The server's state and controls. ``url`` is set once :meth:`start` returns."""

    def __init__(self, token: str = "hf_loopback_test_token", user: str = "loopback-user"):
        self.token, self.user = token, user
        self.repos: dict[tuple[str, str], Repo] = {}
        #: (repo type, repo id) -> sha256 -> content: LFS storage is per repo, as on the Hub.
        self.lfs_objects: dict[tuple[str, str], dict[str, bytes]] = {}
        self.requests: list[str] = []
        self.failures: list[FailureRule] = []
        self.lock = threading.RLock()
        self.url = ""
        self._server: ThreadingHTTPServer | None = None
        self._connections: set[socket.socket] = set()
        self._commits = 0

    # -- controls -------------------------------------------------------------------------------------------------

    def start(self) -> LoopbackHub:
        hub = self

        class Handler(_Handler):
            state = hub

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        threading.Thread(target=self._server.serve_forever, name="loopback-hub", daemon=True).start()
        return self

    def stop(self) -> None:
        """Stop serving and drop open keep-alive connections, so that clients see the Hub as unreachable."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        with self.lock:
            for connection in self._connections:
                try:
                    connection.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
            self._connections.clear()

    def fail(
        self, status: int, match: str = "", after: int = 0, times: int | None = 1, headers: dict | None = None
    ) -> FailureRule:
        """Inject failures; see :class:`FailureRule`. E.g. ``fail(500, r"^POST /api/datasets/.*/commit/")``, or
        ``fail(429, "", headers={"Retry-After": "30"})``."""
        rule = FailureRule(status=status, match=match, after=after, times=times, headers=dict(headers or {}))
        with self.lock:
            self.failures.append(rule)
        return rule

    def drop_connection(self, match: str = "", after: int = 0, times: int | None = 1) -> FailureRule:
        """Close the connection half-way through matching requests, unanswered; see :class:`FailureRule`."""
        return self.fail(None, match, after, times)  # type: ignore[arg-type]

    def recover(self) -> None:
        """Remove every injected failure: the Hub works again."""
        with self.lock:
            self.failures.clear()

    def files(self, repo_id: str, repo_type: str = "dataset", revision: str = "main") -> dict[str, bytes]:
        """Path -> content of every file of ``repo_id`` at ``revision`` (empty if the repo or branch is missing)."""
        with self.lock:
            repo = self.repos.get((repo_type, repo_id))
            branch = repo.branches.get(revision) if repo else None
            return {path: stored.content for path, stored in branch.files.items()} if branch else {}

    def commit_messages(self, repo_id: str, repo_type: str = "dataset", revision: str = "main") -> list[str]:
        with self.lock:
            return list(self.repos[(repo_type, repo_id)].branches[revision].messages)

    # -- state changes (called by the handler under the lock) -----------------------------------------------------

    def new_commit_id(self) -> str:
        self._commits += 1
        return hashlib.sha1(f"loopback commit {self._commits}".encode()).hexdigest()

    def repo(self, repo_type: str, repo_id: str, authorized: bool) -> Repo:
        repo = self.repos.get((repo_type, repo_id))
        if repo is None or (repo.private and not authorized):
            raise HubError(404, f"Repository Not Found for {repo_type} {repo_id}", "RepoNotFound")
        return repo

    @staticmethod
    def branch(repo: Repo, revision: str) -> Branch:
        """The branch ``revision`` (to write to)."""
        if revision not in repo.branches:
            raise HubError(404, f"Invalid rev id: {revision}", "RevisionNotFound")
        return repo.branches[revision]

    @staticmethod
    def snapshot(repo: Repo, revision: str) -> Branch:
        """The files at ``revision``, a branch name or a commit id (to read)."""
        if revision in repo.branches:
            return repo.branches[revision]
        if revision in repo.snapshots:
            return Branch(commit=revision, files=repo.snapshots[revision])
        raise HubError(404, f"Invalid rev id: {revision}", "RevisionNotFound")


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as the client expects; every response carries Content-Length
    state: LoopbackHub

    def log_message(self, format: str, *args: object) -> None:  # keep test output clean
        pass

    def setup(self) -> None:
        super().setup()
        with self.state.lock:
            self.state._connections.add(self.connection)

    def finish(self) -> None:
        super().finish()
        with self.state.lock:
            self.state._connections.discard(self.connection)

    # -- plumbing --------------------------------------------------------------------------------------------------

    def _read_body(self) -> bytes:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            body = b""
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip(), 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return body
                body += self.rfile.read(size)
                self.rfile.readline()
        return self.rfile.read(int(self.headers.get("Content-Length") or 0))

    def _send(self, status: int, body: bytes = b"", headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        for name, value in {"Content-Length": str(len(body)), **(headers or {})}.items():
            self.send_header(name, value)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _json(self, status: int, payload: object, headers: dict[str, str] | None = None) -> None:
        self._send(status, json.dumps(payload).encode(), {"Content-Type": "application/json", **(headers or {})})

    def _drop_connection(self) -> None:
        """Read half of the request body (or a chunk header), then close without answering: a connection lost
        mid-upload, as the client sees it."""
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            self.rfile.read(length // 2)
        elif self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            self.rfile.readline()
        self.close_connection = True
        self.connection.shutdown(socket.SHUT_RDWR)

    def _serve(self) -> None:
        hub, method = self.state, self.command
        path, _, query = self.path.partition("?")
        request_line = f"{method} {path}"
        with hub.lock:
            hub.requests.append(request_line)
            rule = next((rule for rule in hub.failures if rule.fires(request_line)), None)
        if rule is not None and rule.status is None:
            return self._drop_connection()
        body = self._read_body()
        try:
            if rule is not None:
                raise HubError(rule.status, f"injected failure {rule.status} for {request_line}", headers=rule.headers)
            auth = self.headers.get("Authorization", "")
            if auth and auth != f"Bearer {hub.token}":
                raise HubError(401, "Invalid credentials in Authorization header")
            segments = path.split("/")[1:]
            self._route(method, segments, parse_qs(query), body, authorized=bool(auth))
        except HubError as error:
            headers = {"X-Error-Message": error.message, **error.headers}
            if error.error_code:
                headers["X-Error-Code"] = error.error_code
            self._json(error.status, {"error": error.message}, headers)

    do_GET = do_HEAD = do_POST = do_PUT = do_DELETE = _serve

    def _route(self, method: str, segments: list[str], query: dict, body: bytes, authorized: bool) -> None:
        hub = self.state
        if segments[:1] == ["api"]:
            rest = segments[1:]
            if rest == ["whoami-v2"]:
                return self._whoami(authorized)
            if rest == ["validate-yaml"] and method == "POST":
                return self._validate_yaml(body)
            if rest == ["repos", "create"] and method == "POST":
                return self._create_repo(body, authorized)
            if rest == ["repos", "delete"] and method == "DELETE":
                return self._delete_repo(body, authorized)
            if len(rest) >= 3 and rest[0].endswith("s"):
                repo_type, repo_id, action = rest[0][:-1], f"{rest[1]}/{rest[2]}", rest[3:]
                with hub.lock:
                    return self._repo_api(method, repo_type, repo_id, action, query, body, authorized)
        if segments[:1] == ["lfs-upload"] and len(segments) == 5 and method == "PUT":
            return self._lfs_store((segments[1], f"{segments[2]}/{segments[3]}"), segments[4], body)
        if segments[:1] == ["lfs-verify"] and len(segments) == 4 and method == "POST":
            return self._lfs_verify((segments[1], f"{segments[2]}/{segments[3]}"), body)
        repo_type = _TYPE_OF_PREFIX.get(segments[0], "model") if segments else "model"
        rest = segments[1:] if repo_type != "model" else segments
        if len(rest) >= 2 and rest[1].endswith(".git") and rest[2:] == ["info", "lfs", "objects", "batch"]:
            return self._lfs_batch(repo_type, f"{rest[0]}/{rest[1][:-4]}", body, authorized)
        if len(rest) >= 5 and rest[2] == "resolve" and method in ("GET", "HEAD"):
            revision, filename = unquote(rest[3]), unquote("/".join(rest[4:]))
            return self._resolve(repo_type, f"{rest[0]}/{rest[1]}", revision, filename, authorized)
        raise HubError(404, f"the loopback hub does not serve {method} /{'/'.join(segments)}")

    @staticmethod
    def _require_auth(authorized: bool) -> None:
        if not authorized:
            raise HubError(401, "You must be authenticated to write to the Hub")

    # -- endpoints --------------------------------------------------------------------------------------------------

    def _whoami(self, authorized: bool) -> None:
        self._require_auth(authorized)
        user = self.state.user
        self._json(200, {"type": "user", "name": user, "fullname": user, "orgs": [], "auth": {"type": "access_token"}})

    def _validate_yaml(self, body: bytes) -> None:
        content = json.loads(body)["content"]
        match = re.match(r"^---\n(.*?)\n---", content, re.DOTALL)
        try:
            metadata = yaml.safe_load(match.group(1)) if match else {}
        except yaml.YAMLError as error:
            return self._json(400, {"errors": [{"message": f"invalid YAML: {error}"}], "warnings": []})
        if metadata is not None and not isinstance(metadata, dict):
            return self._json(400, {"errors": [{"message": "metadata must be a mapping"}], "warnings": []})
        self._json(200, {"errors": [], "warnings": []})

    def _create_repo(self, body: bytes, authorized: bool) -> None:
        self._require_auth(authorized)
        payload = json.loads(body)
        repo_type = payload.get("type") or "model"
        repo_id = f"{payload.get('organization') or self.state.user}/{payload['name']}"
        url = f"{self.state.url}/{_PREFIX_OF_TYPE[repo_type]}{repo_id}"
        with self.state.lock:
            if (repo_type, repo_id) in self.state.repos:
                return self._json(409, {"error": f"You already created this {repo_type} repo", "url": url})
            main = Branch(commit=self.state.new_commit_id(), messages=["initial commit"])
            private = payload.get("visibility") == "private" or payload.get("private") is True
            repo = Repo(private=private, branches={"main": main}, snapshots={main.commit: {}})
            self.state.repos[(repo_type, repo_id)] = repo
        self._json(200, {"url": url, "name": repo_id, "id": repo_id})

    def _delete_repo(self, body: bytes, authorized: bool) -> None:
        self._require_auth(authorized)
        payload = json.loads(body)
        key = (payload.get("type") or "model", f"{payload.get('organization') or self.state.user}/{payload['name']}")
        with self.state.lock:
            if key not in self.state.repos:
                raise HubError(404, f"Repository Not Found for {key[0]} {key[1]}", "RepoNotFound")
            del self.state.repos[key]
        self._json(200, {})

    def _repo_api(
        self, method: str, repo_type: str, repo_id: str, action: list[str], query: dict, body: bytes, authorized: bool
    ) -> None:
        hub = self.state
        repo = hub.repo(repo_type, repo_id, authorized)
        if method == "GET" and (action == [] or action[:1] == ["revision"]):
            revision = unquote("/".join(action[1:])) if action else "main"
            return self._repo_info(repo_type, repo_id, repo, hub.snapshot(repo, revision))
        if method == "GET" and action[:1] == ["tree"] and len(action) >= 2:
            branch = hub.snapshot(repo, unquote(action[1]))
            recursive = query.get("recursive", ["false"])[0].lower() == "true"
            return self._json(200, _tree(branch, unquote("/".join(action[2:])), recursive))
        if method == "POST" and action[:1] == ["paths-info"] and len(action) == 2:
            branch = hub.snapshot(repo, unquote(action[1]))
            wanted = parse_qs(body.decode()).get("paths", [])
            return self._json(200, [entry for entry in _tree(branch, "", True) if entry["path"] in wanted])
        self._require_auth(authorized)
        if "create_pr" in query:
            raise HubError(400, "the loopback hub does not support pull requests")
        if method == "POST" and action[:1] == ["preupload"] and len(action) == 2:
            branch = hub.branch(repo, unquote(action[1]))
            return self._preupload(branch, json.loads(body))
        if method == "POST" and action[:1] == ["commit"] and len(action) == 2:
            return self._commit(repo_type, repo_id, repo, hub.branch(repo, unquote(action[1])), body)
        if method == "POST" and action[:1] == ["branch"] and len(action) == 2:
            name = unquote(action[1])
            if name in repo.branches:
                raise HubError(409, f"Reference already exists: refs/heads/{name}")
            start = json.loads(body or b"{}").get("startingPoint") or "main"
            source = hub.branch(repo, start)
            repo.branches[name] = Branch(source.commit, dict(source.files), list(source.messages))
            return self._json(200, {})
        raise HubError(404, f"the loopback hub does not serve {method} {repo_type} {repo_id} {'/'.join(action)}")

    def _repo_info(self, repo_type: str, repo_id: str, repo: Repo, branch: Branch) -> None:
        self._json(
            200,
            {
                "id": repo_id,
                "author": repo_id.split("/")[0],
                "sha": branch.commit,
                "private": repo.private,
                "disabled": False,
                "gated": False,
                "lastModified": _TIMESTAMP,
                "createdAt": _TIMESTAMP,
                "tags": [],
                "downloads": 0,
                "likes": 0,
                "siblings": [{"rfilename": path} for path in sorted(branch.files)],
            },
        )

    def _preupload(self, branch: Branch, payload: dict) -> None:
        answers = []
        for entry in payload["files"]:
            lfs = entry["path"].endswith(LFS_SUFFIXES) or entry["size"] >= LFS_MIN_BYTES
            existing = branch.files.get(entry["path"])
            answers.append(
                {
                    "path": entry["path"],
                    "uploadMode": "lfs" if lfs else "regular",
                    "shouldIgnore": False,
                    "oid": existing.oid if existing else None,
                }
            )
        self._json(200, {"files": answers, "commitOid": branch.commit})

    def _commit(self, repo_type: str, repo_id: str, repo: Repo, branch: Branch, body: bytes) -> None:
        hub = self.state
        lines = [json.loads(line) for line in body.decode().splitlines() if line.strip()]
        if not lines or lines[0].get("key") != "header":
            raise HubError(400, "a commit starts with a header line")
        header = lines[0]["value"]
        if header.get("parentCommit") not in (None, branch.commit):
            raise HubError(412, "A commit has happened since. Please refresh and try again.")
        files = dict(branch.files)
        for line in lines[1:]:
            key, value = line["key"], line["value"]
            if key == "file":
                files[value["path"]] = StoredFile(base64.b64decode(value["content"]), lfs=False)
            elif key == "lfsFile":
                stored = hub.lfs_objects.get((repo_type, repo_id), {}).get(value["oid"])
                if stored is None:
                    raise HubError(422, f"LFS object {value['oid']} of {value['path']} was never uploaded")
                files[value["path"]] = StoredFile(stored, lfs=True)
            elif key == "deletedFile":
                if files.pop(value["path"], None) is None:
                    raise HubError(404, f"A file with this name doesn't exist: {value['path']}", "EntryNotFound")
            elif key == "deletedFolder":
                prefix = value["path"].rstrip("/") + "/"
                files = {path: stored for path, stored in files.items() if not path.startswith(prefix)}
            else:
                raise HubError(400, f"the loopback hub does not support commit operation {key!r}")
        branch.files, branch.commit = files, hub.new_commit_id()
        repo.snapshots[branch.commit] = files
        branch.messages.append(header.get("summary", ""))
        commit_url = f"{hub.url}/{_PREFIX_OF_TYPE[repo_type]}{repo_id}/commit/{branch.commit}"
        self._json(200, {"success": True, "commitOid": branch.commit, "commitUrl": commit_url})

    def _lfs_batch(self, repo_type: str, repo_id: str, body: bytes, authorized: bool) -> None:
        hub = self.state
        self._require_auth(authorized)
        with hub.lock:
            hub.repo(repo_type, repo_id, authorized)
            stored = hub.lfs_objects.get((repo_type, repo_id), {})
            objects = []
            for entry in json.loads(body)["objects"]:
                answer = {"oid": entry["oid"], "size": entry["size"], "authenticated": True}
                if entry["oid"] not in stored:
                    answer["actions"] = {
                        "upload": {"href": f"{hub.url}/lfs-upload/{repo_type}/{repo_id}/{entry['oid']}"},
                        "verify": {"href": f"{hub.url}/lfs-verify/{repo_type}/{repo_id}"},
                    }
                objects.append(answer)
        self._json(200, {"transfer": "basic", "objects": objects})

    def _lfs_store(self, repo_key: tuple[str, str], oid: str, body: bytes) -> None:
        if hashlib.sha256(body).hexdigest() != oid:
            raise HubError(400, f"uploaded content does not hash to {oid}")
        with self.state.lock:
            self.state.lfs_objects.setdefault(repo_key, {})[oid] = body
        self._send(200)

    def _lfs_verify(self, repo_key: tuple[str, str], body: bytes) -> None:
        payload = json.loads(body)
        with self.state.lock:
            stored = self.state.lfs_objects.get(repo_key, {}).get(payload["oid"])
        if stored is None or len(stored) != payload["size"]:
            raise HubError(404, f"LFS object {payload['oid']} is not stored")
        self._json(200, {})

    def _resolve(self, repo_type: str, repo_id: str, revision: str, filename: str, authorized: bool) -> None:
        hub = self.state
        with hub.lock:
            branch = hub.snapshot(hub.repo(repo_type, repo_id, authorized), revision)
            stored = branch.files.get(filename)
            if stored is None:
                raise HubError(404, f"Entry not found: {filename}", "EntryNotFound")
            commit = branch.commit
        headers = {"X-Repo-Commit": commit, "ETag": f'"{stored.oid}"', "Content-Type": "application/octet-stream"}
        if stored.lfs:
            headers.update({"X-Linked-Etag": f'"{stored.oid}"', "X-Linked-Size": str(len(stored.content))})
        content, status = stored.content, 200
        ranged = re.fullmatch(r"bytes=(\d+)-(\d*)", self.headers.get("Range", ""))
        if ranged:
            start = int(ranged.group(1))
            end = int(ranged.group(2)) + 1 if ranged.group(2) else len(content)
            content, status = content[start:end], 206
            headers["Content-Range"] = f"bytes {start}-{start + len(content) - 1}/{len(stored.content)}"
        self._send(status, content, headers)


def _tree(branch: Branch, under: str, recursive: bool) -> list[dict]:
    """Tree entries below folder ``under`` ('' for the root), as the Hub's tree API lists them."""
    prefix = under.strip("/") + "/" if under.strip("/") else ""
    files, folders = [], set()
    for path, stored in sorted(branch.files.items()):
        if not path.startswith(prefix):
            continue
        parts = path[len(prefix) :].split("/")
        for depth in range(1, len(parts)):
            if recursive or depth == 1:
                folders.add(prefix + "/".join(parts[:depth]))
        if recursive or len(parts) == 1:
            entry = {"type": "file", "oid": git_blob_oid(stored.content), "size": len(stored.content), "path": path}
            if stored.lfs:
                entry["lfs"] = {"oid": stored.oid, "size": len(stored.content), "pointerSize": 134}
            files.append(entry)
    folder_entries = [{"type": "directory", "oid": git_blob_oid(f.encode()), "path": f} for f in sorted(folders)]
    return folder_entries + files


@pytest.fixture
def loopback_hub(monkeypatch: pytest.MonkeyPatch) -> Iterator[LoopbackHub]:
    """A started :class:`LoopbackHub` that huggingface_hub and datasets in this process (and subprocesses, through
    ``HF_ENDPOINT``) talk to, with offline mode lifted for the test and Xet off."""
    import datasets
    from huggingface_hub import constants

    hub = LoopbackHub().start()
    # datasets copies the endpoint and offline switch at import, so it is pointed at the loopback Hub separately
    monkeypatch.setattr(datasets.config, "HF_ENDPOINT", hub.url)
    monkeypatch.setattr(datasets.config, "HUB_DATASETS_URL", hub.url + "/datasets/{repo_id}/resolve/{revision}/{path}")
    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(datasets.config, "HF_DATASETS_OFFLINE", False)
    monkeypatch.setattr(constants, "ENDPOINT", hub.url)
    monkeypatch.setattr(constants, "HUGGINGFACE_CO_URL_TEMPLATE", hub.url + "/{repo_id}/resolve/{revision}/{filename}")
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(constants, "HF_HUB_DISABLE_XET", True)
    monkeypatch.setenv("HF_ENDPOINT", hub.url)
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    monkeypatch.setenv("HF_HUB_DISABLE_XET", "1")
    monkeypatch.delenv("TRANSFORMERS_OFFLINE", raising=False)  # huggingface_hub reads it as HF_HUB_OFFLINE too
    try:
        yield hub
    finally:
        hub.stop()
