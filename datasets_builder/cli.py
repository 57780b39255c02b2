"""``python -m datasets_builder``: list tasks, build a task config into a Hub-format folder, show it, push it.

The options of ``build --task NAME`` come from the task's ``Params`` dataclass: one ``--<field>`` per field, help
from the field metadata, lists as several values, booleans as ``--<field>``/``--no-<field>``. Every error ends the
program with one line (exit code 2 for bad input, 1 for a failed push), never a traceback.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any

from datasets_builder import registry

PROG = "python -m datasets_builder"


class _Parser(argparse.ArgumentParser):
    """An ArgumentParser whose errors are one line: ``prog: error: message``."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {message}\n")


def _add_task_options(parser: argparse.ArgumentParser, task_name: str) -> None:
    """One option per field of the task's ``Params``, in a group named after the task."""
    task = registry.get_task(task_name)
    group = parser.add_argument_group(f"{task_name} parameters", task.DESCRIPTION)
    for field, annotation in registry.param_fields(task):
        default = registry.field_default(field)
        kwargs: dict[str, Any] = {"dest": f"param_{field.name}", "default": default}
        kwargs["help"] = field.metadata["help"] + " (default: %(default)s)"
        if "choices" in field.metadata:
            kwargs["choices"] = field.metadata["choices"]
        element = registry.list_element_type(annotation)
        if annotation is bool:
            kwargs["action"] = argparse.BooleanOptionalAction
        elif element is not None:
            kwargs.update(nargs="+", type=element, metavar=field.name.upper())
        elif "choices" in kwargs:
            kwargs["type"] = annotation  # argparse shows the choices as the metavar
        else:
            kwargs.update(type=annotation, metavar=field.name.upper())
        group.add_argument(registry.option_name(field.name), **kwargs)


def _requested_task(argv: Sequence[str]) -> str | None:
    """The value of ``--task`` in ``argv``, if any: the build parser's options depend on it."""
    for index, token in enumerate(argv):
        if token == "--task" and index + 1 < len(argv):
            return argv[index + 1]
        if token.startswith("--task="):
            return token.split("=", 1)[1]
    return None


def build_parser(argv: Sequence[str] = ()) -> argparse.ArgumentParser:
    """The full parser; ``argv`` is looked at only to add the options of the task named by ``build --task``."""
    parser = _Parser(prog=PROG, description="Build hf_icot task datasets in Hub format and publish them.")
    commands = parser.add_subparsers(dest="command", required=True, metavar="{list,build,show,push}")

    listing = commands.add_parser("list", help="List the tasks that can be built.", description="List the tasks.")
    listing.set_defaults(run=_run_list, command_parser=listing)

    build = commands.add_parser(
        "build",
        help="Build one config of a task into a Hub-format folder.",
        description="Generate one config of a task and write it into OUT as a Hub dataset repo: "
        "OUT/<config>/<split>-0000i-of-0000N.parquet, OUT/<config>/icot_config.json and a README.md card listing "
        "every config in OUT. Other configs in OUT are kept byte for byte; a failed build leaves OUT unchanged. "
        f"Tasks: {', '.join(registry.task_names())}. Add --task NAME --help to see the task's parameters.",
    )
    build.add_argument("--task", required=True, help=f"Task to build; one of: {', '.join(registry.task_names())}.")
    build.add_argument("--out", required=True, help="Output folder (new, empty, or built before).")
    build.add_argument("--license", default=None, help="License id for the card, e.g. mit (default: none stated).")
    build.add_argument(
        "--config_name", default=None, help="Name of the config to write (default: derived from the task parameters)."
    )
    build.add_argument(
        "--overwrite", action="store_true", help="Replace a config of the same name built from other parameters."
    )
    build.add_argument("--no-progress", dest="progress", action="store_false", help="Hide the progress bars.")
    build.set_defaults(run=_run_build, command_parser=build)
    task_name = _requested_task(argv) if "build" in argv else None
    if task_name is not None:
        if task_name not in registry.task_names():
            build.error(f"task {task_name!r} is unknown; allowed: {', '.join(registry.task_names())}.")
        _add_task_options(build, task_name)

    show = commands.add_parser(
        "show",
        help="Print examples of a built config as 'question||cot #### answer' lines.",
        description="Load a config (a local folder or a Hub repo id) and print its first examples as reference "
        "lines, optionally with part of the chain of thought removed.",
    )
    show.add_argument("path", help="Built folder or Hub dataset repo id.")
    show.add_argument("--config", required=True, help="Config to load.")
    show.add_argument("--split", default=None, help="Split to print (default: the first split).")
    show.add_argument(
        "--truncation",
        default=None,
        help="CoT truncation spec, '[unit:]which[:count][:fill][:hint][:saturate]', e.g. 'all', 'step:left:2' "
        "(default: full CoT).",
    )
    show.add_argument("-n", "--num", type=int, default=5, help="Number of examples to print (default: %(default)s).")
    show.set_defaults(run=_run_show, command_parser=show)

    push = commands.add_parser(
        "push",
        help="Upload a built folder to a Hub dataset repo.",
        description="Upload DIR to the Hub dataset repo ID in one commit, creating the repo if it does not exist. "
        "The token comes from --token, else HF_TOKEN or the saved login; it is never printed. "
        "DIR is only read, so a failed push can be retried.",
    )
    push.add_argument("folder", metavar="DIR", help="Folder written by 'build'.")
    push.add_argument("--repo", required=True, metavar="ID", help="Dataset repo id, 'namespace/name'.")
    push.add_argument(
        "--private", action="store_true", help="Create the repo as private (an existing repo keeps its visibility)."
    )
    push.add_argument("--revision", default=None, help="Branch to commit to, created if missing (default: main).")
    push.add_argument("--token", default=None, help="Hub token (default: HF_TOKEN or the saved login).")
    push.add_argument("--message", default=None, help="Commit message (default: names the configs).")
    push.set_defaults(run=_run_push, command_parser=push)
    return parser


def _run_list(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    for name in registry.task_names():
        task = registry.get_task(name)
        summary = task.DESCRIPTION.split(". ")[0].rstrip(".")
        print(f"{name:16} v{task.GENERATOR_VERSION}  {summary}.")
    return 0


def _run_build(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    from datasets_builder import publish
    from hf_icot.errors import DiskFullError

    task = registry.get_task(args.task)
    values = {field.name: getattr(args, f"param_{field.name}") for field, _ in registry.param_fields(task)}
    try:
        params = task.Params(**values)
        record = publish.build_config(
            args.out,
            args.task,
            params,
            progress=args.progress,
            license=args.license,
            config_name=args.config_name,
            overwrite=args.overwrite,
        )
    except ValueError as error:
        parser.error(str(error))
    except DiskFullError as error:
        parser.exit(1, f"{parser.prog}: error: {error}\n")
    except KeyboardInterrupt:
        parser.exit(130, f"{parser.prog}: interrupted; {args.out} is unchanged.\n")
    sizes = ", ".join(f"{split} {info['num_examples']}" for split, info in record["splits"].items())
    print(f"wrote config {record['config_name']} ({sizes}) to {args.out}; fingerprint {record['fingerprint']}")
    return 0


def _run_show(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    import datasets

    from hf_icot.cot import render_line
    from hf_icot.data import load_icot_dataset

    datasets.disable_progress_bars()  # the output is the examples, one per line
    if args.num < 0:
        parser.error(f"-n {args.num} is not allowed; give a count >= 0.")
    try:
        loaded = load_icot_dataset(args.path, args.config, truncation=args.truncation, split=args.split)
    except ValueError as error:
        parser.error(str(error))
    split = args.split or next(iter(loaded))
    dataset = loaded if args.split else loaded[split]
    for example in dataset.select(range(min(args.num, len(dataset)))):
        print(render_line(example))
    return 0


def _run_push(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    from datasets_builder import publish

    try:
        url = publish.push(args.folder, args.repo, private=args.private, revision=args.revision, token=args.token,
                           commit_message=args.message)  # fmt: skip
    except ValueError as error:
        parser.error(str(error))
    except publish.PushError as error:
        print(f"{parser.prog}: error: {error}", file=sys.stderr)
        return 1
    print(f"pushed {args.folder} to {url}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line ``argv`` (default: ``sys.argv[1:]``); returns the exit code (argparse errors exit)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    args = build_parser(argv).parse_args(argv)
    return args.run(args, args.command_parser)
