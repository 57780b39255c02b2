"""Push a run folder to the Hugging Face Hub.

A finished run leaves one self-contained folder (:mod:`hf_icot.publishing.saving` writes its safetensors weights and
tokenizer, :mod:`hf_icot.publishing.model_card` its card, loss curve and log history). Pushing uploads that folder as
it is, so an upload that fails can be retried without retraining::

    python -m hf_icot.publishing.hub push OUTPUT_DIR --repo USER/NAME [--private] [--revision BRANCH]
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hf_icot.locations import is_hub_id, names_a_missing_folder  # noqa: F401  (their home until 2026-12-04)

#: What a run folder may hold that is not part of the published model (Trainer and per-stage checkpoints,
#: TensorBoard runs, staging folders); a pattern's ``*`` also matches ``/``.
PUSH_IGNORE = ["checkpoint-*", "stage-*", "runs/*", ".*", "*.lock"]


class PushError(RuntimeError):
    """An upload that did not happen; the message is one sentence saying why and how to retry, never the token."""


def upload_in_one_commit(
    api: Any,
    folder: str | os.PathLike,
    repo_id: str,
    repo_type: str,
    private: bool,
    revision: str | None,
    commit_message: str,
    ignore_patterns: list[str] | None = None,
) -> Any:
    """Create ``repo_id`` if missing (``private`` applies only then) and the branch ``revision`` if given, then upload
    ``folder`` in one commit with ``api`` (a ``huggingface_hub.HfApi``); returns the commit info. Hub errors are
    raised as they are, for the caller to explain."""
    api.create_repo(repo_id, repo_type=repo_type, private=private, exist_ok=True)
    if revision:
        api.create_branch(repo_id, branch=revision, repo_type=repo_type, exist_ok=True)
    return api.upload_folder(
        repo_id=repo_id,
        folder_path=folder,
        repo_type=repo_type,
        revision=revision,
        ignore_patterns=ignore_patterns,
        commit_message=commit_message,
    )


# ---------------------------------------------------------------------------------------------------------------
# Pushing


def check_pushable(output_dir: str | os.PathLike) -> str:
    """Check that ``output_dir`` holds a saved model or adapter in safetensors; return ``"model"`` or ``"adapter"``.

    Raises:
        ValueError: the folder is missing, holds no ``config.json``/``adapter_config.json`` or no safetensors weights,
            or is an adapter whose ``base_model_name_or_path`` is a local path others cannot load.
    """
    folder = Path(output_dir)
    if not folder.is_dir():
        raise ValueError(f"output folder {str(folder)!r} does not exist; give the output_dir of a finished run.")
    kind = "adapter" if (folder / "adapter_config.json").is_file() else "model"
    if kind == "model" and not (folder / "config.json").is_file():
        raise ValueError(
            f"{str(folder)!r} holds neither config.json nor adapter_config.json; give the output_dir of a "
            "finished run."
        )
    if not any(folder.glob("*.safetensors")):
        raise ValueError(f"{str(folder)!r} holds no .safetensors weights; only safetensors models are pushed.")
    if kind == "adapter":
        base = json.loads((folder / "adapter_config.json").read_text()).get("base_model_name_or_path")
        if not is_hub_id(base):
            raise ValueError(
                f"the adapter in {str(folder)!r} names the local base model {base!r}, which others cannot load; "
                "set base_model_name_or_path in adapter_config.json to the base model's Hub id "
                "(the recipe's --base_model_hub_id does this at save time)."
            )
    return kind


def _retry_after_seconds(headers: Any) -> int | None:
    """The wait a 429 answer asks for: ``Retry-After`` in seconds, else the reset of an exhausted ``RateLimit``."""
    from huggingface_hub.utils import parse_ratelimit_headers

    value = (headers.get("Retry-After") or "").strip()
    if value.isdigit():
        return int(value)
    limit = parse_ratelimit_headers(headers)
    return limit.reset_in_seconds if limit is not None and limit.remaining == 0 else None


def describe_push_failure(error: BaseException, repo_id: str, endpoint: str) -> str:
    """Why an upload to ``repo_id`` failed, as a clause for a one-sentence message; never contains the token.

    The reason comes from the first offline, HTTP or network error in the exception chain (the Hub client wraps
    them), else from the first line of ``error``.
    """
    import httpx2
    from huggingface_hub.errors import HfHubHTTPError, OfflineModeIsEnabled

    chain, seen = [], error
    while seen is not None and seen not in chain:
        chain.append(seen)
        seen = seen.__cause__ or seen.__context__
    for cause in chain:
        if isinstance(cause, OfflineModeIsEnabled):
            return "HF_HUB_OFFLINE is set (unset it to reach the Hub)"
        response = cause.response if isinstance(cause, HfHubHTTPError) else None
        if response is not None:
            status = response.status_code
            if status in (401, 403):
                return (
                    f"the Hub at {endpoint} refused the token (HTTP {status}); check with `hf auth whoami` that it "
                    f"may write to {repo_id}"
                )
            if status == 429:
                wait = _retry_after_seconds(response.headers)
                limited = f"the Hub at {endpoint} rate-limited the upload (HTTP 429)"
                return limited + (f" and asks to wait {wait} s" if wait is not None else "")
            detail = (cause.server_message or "").strip().splitlines()
            return f"the Hub at {endpoint} answered HTTP {status}" + (f" ({detail[0][:200]})" if detail else "")
        if isinstance(cause, (httpx2.ConnectError, httpx2.ConnectTimeout, ConnectionRefusedError)):
            unreachable = f"the Hub at {endpoint} could not be reached ({type(cause).__name__})"
            return unreachable + "; check the network or HF_ENDPOINT"
        if isinstance(cause, (httpx2.TransportError, ConnectionError, TimeoutError)):
            return f"the connection to the Hub at {endpoint} broke off mid-request ({type(cause).__name__})"
    return (str(error).strip().splitlines() or [type(error).__name__])[0][:300]


def push_command(
    output_dir: str | os.PathLike, repo_id: str, private: bool = False, revision: str | None = None
) -> str:
    """The shell command that (re)uploads ``output_dir`` as it is."""
    command = f"python -m hf_icot.publishing.hub push {shlex.quote(str(output_dir))} --repo {repo_id}"
    return command + (" --private" if private else "") + (f" --revision {revision}" if revision else "")


def push_output_dir(
    output_dir: str | os.PathLike,
    repo_id: str,
    private: bool = False,
    revision: str | None = None,
    token: str | None = None,
    *,
    endpoint: str | None = None,
) -> str:
    """Upload a finished run folder (model or adapter, tokenizer, card, curves) to the Hub in one commit.

    Trainer checkpoints, hidden files and pickled weights are left out. The folder itself is only read, so a failed
    upload can be retried with :func:`push_command`'s command.

    Args:
        output_dir: the run folder.
        repo_id: ``owner/name`` of the model repo (created if missing).
        private: create the repo private.
        revision: branch to push to (created from main if missing); main by default.
        token: a Hub token; by default the one from ``HF_TOKEN`` or ``hf auth login``.
        endpoint: the Hub URL; by default ``HF_ENDPOINT`` or https://huggingface.co.

    Returns:
        The URL of the commit.

    Raises:
        ValueError: ``output_dir`` is not a pushable run folder (see :func:`check_pushable`).
        PushError: no token, offline mode, or the Hub refused or failed the upload (one sentence with the retry
            command).
    """
    from huggingface_hub import HfApi, constants, get_token

    check_pushable(output_dir)
    retry = push_command(output_dir, repo_id, private, revision)
    if constants.is_offline_mode():
        raise PushError(
            f"cannot push {output_dir} to {repo_id}: HF_HUB_OFFLINE is set, so the Hub is unreachable; "
            f"unset it, then run `{retry}`."
        )
    token = token or get_token()
    if not token:
        raise PushError(
            f"cannot push {output_dir} to {repo_id}: no Hugging Face token found; "
            f"run `hf auth login` or set HF_TOKEN, then run `{retry}`."
        )
    api = HfApi(endpoint=endpoint, token=token)
    try:
        commit = upload_in_one_commit(
            api,
            output_dir,
            repo_id,
            "model",
            private,
            revision,
            "Upload ICoT model trained with hf_icot",
            ignore_patterns=PUSH_IGNORE + ["*.bin", "*.pt", "*.pth", "*.pkl"],
        )
    except Exception as error:  # any failure of the two Hub calls is reported the same way: nothing local changed
        raise PushError(
            f"pushing {output_dir} to {repo_id} failed: {describe_push_failure(error, repo_id, api.endpoint)}; "
            f"the folder is intact, so retry with `{retry}`."
        ) from error
    return str(getattr(commit, "commit_url", commit))


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m hf_icot.publishing.hub push OUTPUT_DIR --repo ID [--private] [--revision R]``."""
    parser = argparse.ArgumentParser(
        prog="python -m hf_icot.publishing.hub",
        description="Upload a finished hf_icot run folder (weights, tokenizer, model card, curves) to the Hugging "
        "Face Hub, as it is on disk: use it to retry a push that failed at the end of training.",
    )
    commands = parser.add_subparsers(dest="command", required=True)
    push = commands.add_parser(
        "push",
        help="upload OUTPUT_DIR to a model repo",
        description="Upload OUTPUT_DIR to a model repo in one commit (checkpoints, hidden files and pickles left "
        "out). The token comes from HF_TOKEN or `hf auth login`; HF_ENDPOINT selects another Hub.",
    )
    push.add_argument("output_dir", help="the run folder holding the saved model or adapter")
    push.add_argument("--repo", required=True, help="model repo id, owner/name (created if missing)")
    push.add_argument(
        "--private", action="store_true", help="create the repo private (an existing repo keeps its own)"
    )
    push.add_argument("--revision", default=None, help="branch to push to (created if missing); default main")
    args = parser.parse_args(argv)
    try:
        url = push_output_dir(args.output_dir, args.repo, private=args.private, revision=args.revision)
    except ValueError as error:
        push.error(str(error))
    except PushError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    print(f"pushed {args.output_dir} to {args.repo}: {url}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
