"""The library's rooms: no import circle and no import pointing up the rooms (imports inside functions and lazy
exports included), the rooms listed bottom up where they are described, no room over 2,500 lines, no module over ~450
(nor kept under it by ``# fmt: skip``), every schedule field declared once, the public paths users copy, and a run
folder written before the layout move still loading and resuming exactly."""

from __future__ import annotations

import ast
import dataclasses
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file
from transformers import AutoModelForCausalLM, AutoTokenizer

REPO = Path(__file__).resolve().parents[2]
PACKAGE = REPO / "hf_icot"
MAX_LINES = 450
OLD_RUN = REPO / "tests" / "fixtures" / "run_before_layout_move"


def library_modules() -> list[str]:
    names = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if "metrics/exact_match" in path.as_posix():  # an `evaluate` script, loaded by path
            continue
        parts = path.relative_to(REPO).with_suffix("").parts
        names.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return names


def test_every_module_imports_on_its_own_in_a_fresh_interpreter() -> None:
    """Each module imported with no other hf_icot module loaded before it (a circle shows as a partially initialised
    module); one interpreter keeps the third-party libraries loaded between modules, which cannot hide a circle."""
    script = (
        "import importlib, sys\n"
        f"failed = []\nfor name in {library_modules()!r}:\n"
        "    for loaded in [m for m in sys.modules if m == 'hf_icot' or m.startswith('hf_icot.')]:\n"
        "        del sys.modules[loaded]\n"
        "    try:\n        importlib.import_module(name)\n"
        "    except Exception as error:\n        failed.append(f'{name}: {type(error).__name__}: {error}')\n"
        "print('\\n'.join(failed))\n"
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=REPO, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip() == "", result.stdout


def module_files() -> dict[str, Path]:
    """Every library module by dotted name (a package by its ``__init__.py``)."""
    files = {}
    for name in library_modules():
        path = REPO / (name.replace(".", "/") + ".py")
        files[name] = path if path.is_file() else path.with_suffix("") / "__init__.py"
    return files


def every_import(path: Path, modules: set[str]) -> list[tuple[int, str]]:
    """``(line, module)`` of every library module ``path`` imports, wherever the import is: module level, inside a
    function, under ``TYPE_CHECKING`` alike (the whole tree is walked, not only the module's body). ``from package
    import submodule`` counts as the submodule, ``from hf_icot import x`` as ``hf_icot.x`` where that is a module (else
    the package), and a package's lazy exports (a mapping of name -> module, for :func:`hf_icot._lazy.lazy_exports`)
    as imports of the modules they name, except the top package's: its public names, loaded on use."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module == "hf_icot" or node.module.startswith("hf_icot."):
                for alias in node.names:
                    submodule = f"{node.module}.{alias.name}"
                    found.append((node.lineno, submodule if submodule in modules else node.module))
        elif isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names if alias.name.split(".")[0] == "hf_icot"]
        elif isinstance(node, ast.Dict) and node.values and path != PACKAGE / "__init__.py":
            values = [value.value for value in node.values if isinstance(value, ast.Constant)]
            if len(values) == len(node.values) and all(value in modules for value in values):
                found += [(node.lineno, value) for value in values]
    return [(line, name) for line, name in found if name in modules]


def import_graph() -> dict[str, set[str]]:
    """Module -> the library modules it imports (:func:`every_import`)."""
    files = module_files()
    return {name: {module for _, module in every_import(path, set(files))} - {name} for name, path in files.items()}


def find_circle(graph: dict[str, set[str]]) -> list[str] | None:
    """One circle of ``graph`` (``[a, b, ..., a]``), or None: a depth-first walk that meets a module still open."""
    state: dict[str, str] = {}  # "open" while its imports are walked, "done" after
    for start in sorted(graph):
        if start in state:
            continue
        path, stack = [start], [iter(sorted(graph[start]))]
        state[start] = "open"
        while stack:
            nxt = next(stack[-1], None)
            if nxt is None:
                state[path.pop()] = "done"
                stack.pop()
            elif state.get(nxt) == "open":
                return [*path[path.index(nxt) :], nxt]
            elif nxt not in state:
                state[nxt] = "open"
                path.append(nxt)
                stack.append(iter(sorted(graph[nxt])))
    return None


def test_the_import_graph_has_no_circle_not_even_inside_a_function() -> None:
    graph = import_graph()
    assert sum(map(len, graph.values())) > 200  # function-level imports and lazy exports are read too
    assert "hf_icot.publishing.hub" in graph["hf_icot.training.outputs"]  # a function-level one
    circle = find_circle(graph)
    assert circle is None, f"import circle: {' -> '.join(circle)}"


def test_the_circle_finder_sees_a_circle_through_a_function_level_import(tmp_path: Path) -> None:
    # command_line.py and flag_cache.py imported each other inside functions, which a module-level reading missed.
    assert find_circle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == ["a", "b", "c", "a"]
    assert find_circle({"a": {"b", "c"}, "b": {"c"}, "c": set()}) is None
    module = tmp_path / "module.py"
    module.write_text("import json\n\n\ndef parse():\n    from hf_icot.command_line import flag_cache\n")
    modules = {"hf_icot.command_line", "hf_icot.command_line.flag_cache"}
    assert every_import(module, modules) == [(5, "hf_icot.command_line.flag_cache")]


#: The rooms bottom up (the order of hf_icot/__init__.py's docstring and docs/architecture.md): a module may import its
#: own room and those below it, never one above. Rooms of one rank sit side by side: evaluation and publishing; the
#: speed levers and what keeps a run safe (below training, which calls both); diagnostics and the command line (above
#: it). Methods (continuous thoughts) sit between the models they run and the evaluation that generates with them.
ROOM_ORDER = {
    "_lazy": 0, "cot": 0, "errors": 0, "locations": 0, "curriculum": 1, "data": 2, "modeling": 3, "methods": 4,
    "evaluation": 5, "publishing": 5, "hub": 5, "levers": 6, "runs": 6, "training": 7, "diagnostics": 8,
    "command_line": 8, "studies": 9,
}  # fmt: skip
#: The most lines of Python a room may hold: past it, a room is a grab bag to split by what its parts are.
MAX_ROOM_LINES = 2500


def room_of(module: str) -> str:
    return module.split(".")[1]


def test_no_import_points_up_the_rooms_not_even_inside_a_function() -> None:
    files = module_files()
    upward, counted = [], 0
    for name, path in files.items():
        if name == "hf_icot":  # the package's public names, loaded on use
            continue
        room = room_of(name)
        assert room in ROOM_ORDER, f"hf_icot/{room} is in no room: add it to ROOM_ORDER (and to docs/architecture.md)"
        for line, module in every_import(path, set(files)):
            counted += 1
            if module != "hf_icot" and ROOM_ORDER[room_of(module)] > ROOM_ORDER[room]:
                upward.append(f"{path.relative_to(REPO)}:{line} imports {module}")
    assert counted > 300, counted  # every import is read, function-level ones and lazy exports included
    assert not upward, "imports that point up the rooms:\n" + "\n".join(upward)


def test_rooms_side_by_side_do_not_import_each_other() -> None:
    """Rooms of one rank import neither way, so every arrow between two rooms runs strictly down the ranks (hub, the old
    path of publishing.hub, is the one alias)."""
    sideways = sorted(
        f"{module} imports {target}"
        for module, targets in import_graph().items()
        if module != "hf_icot"
        for target in targets
        if target != "hf_icot"
        and room_of(module) not in (room_of(target), "hub")
        and ROOM_ORDER[room_of(module)] == ROOM_ORDER[room_of(target)]
    )
    assert not sideways, sideways


def test_the_rooms_are_listed_bottom_up_in_the_package_and_the_architecture_page() -> None:
    """hf_icot/__init__.py's docstring and docs/architecture.md name every room, in an order ROOM_ORDER allows (each
    at the rank of the one before it or higher)."""
    docstring = ast.get_docstring(ast.parse((PACKAGE / "__init__.py").read_text(encoding="utf-8")))
    page = (REPO / "docs" / "architecture.md").read_text(encoding="utf-8")
    listed = {
        "hf_icot/__init__.py": re.findall(r"^\* :mod:`hf_icot\.(\w+)`", docstring, flags=re.M),
        "docs/architecture.md": re.findall(r"^\* `hf_icot/(\w+)(?:/|\.py)`", page, flags=re.M),
    }
    rooms = {path.stem if path.suffix else path.name for path in PACKAGE.iterdir() if not path.name.startswith("_")}
    rooms -= {"errors", "hub"}  # the exceptions every room raises; the old path of publishing.hub
    for where, order in listed.items():
        assert rooms <= set(order), (where, sorted(rooms - set(order)))
        ranks = [ROOM_ORDER[room] for room in order]
        assert ranks == sorted(ranks), f"{where} lists the rooms out of order: {order}"


def test_no_room_is_a_grab_bag_of_more_than_2500_lines() -> None:
    sizes: dict[str, int] = {}
    for path in PACKAGE.rglob("*.py"):
        room = path.relative_to(PACKAGE).parts[0].removesuffix(".py")
        sizes[room] = sizes.get(room, 0) + len(path.read_text(encoding="utf-8").splitlines())
    assert sizes["training"] > 500 and sizes["levers"] > 500  # the rooms are counted
    big = {room: lines for room, lines in sizes.items() if lines > MAX_ROOM_LINES}
    assert not big, f"rooms over {MAX_ROOM_LINES} lines: {big}"


def test_the_light_rooms_import_without_torch() -> None:
    code = (
        "import sys, hf_icot, hf_icot.curriculum, hf_icot.data, hf_icot.evaluation, hf_icot.evaluation.prompts, "
        "hf_icot.training, hf_icot.levers, hf_icot.runs, hf_icot.command_line, hf_icot.command_line.arguments, "
        "hf_icot.studies.sweep, hf_icot.studies.runner, hf_icot.studies.claims, "
        "hf_icot.studies.statistics, hf_icot.studies.report, hf_icot.runs.run_folder\n"
        "print('torch' in sys.modules)"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=120)
    assert result.stdout.strip() == "False", result.stderr[-2000:]


@pytest.mark.parametrize("folder", ["hf_icot", "recipes", "results", "datasets_builder"])
def test_no_module_is_over_450_lines(folder: str) -> None:
    long = {
        str(path.relative_to(REPO)): count
        for path in sorted((REPO / folder).rglob("*.py"))
        if (count := len(path.read_text(encoding="utf-8").splitlines())) > MAX_LINES
    }
    assert not long, long


def test_no_library_module_is_kept_under_450_lines_by_fmt_skip() -> None:
    """``# fmt: skip`` may keep a table readable, not a module under the cap: formatted without it, every module of the
    library still fits in MAX_LINES."""
    ruff = shutil.which("ruff")
    if ruff is None:
        pytest.skip("ruff is not installed (pip install -e .[test])")
    long = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        if "fmt: skip" not in text:
            continue
        unskipped = re.sub(r"[ \t]*# fmt: skip", "", text)
        command = [ruff, "format", "--stdin-filename", str(path), "-"]
        formatted = subprocess.run(command, input=unskipped, capture_output=True, text=True, cwd=REPO, check=True)
        if (count := len(formatted.stdout.splitlines())) > MAX_LINES:
            long[str(path.relative_to(REPO))] = count
    assert not long, long


def test_every_schedule_field_is_declared_once_and_the_config_derives_it() -> None:
    from hf_icot.curriculum import SCHEDULES, schedule_options
    from hf_icot.methods import method_options
    from hf_icot.training.config import ICoTConfig, ScheduleArguments

    assert not set(schedule_options()) & set(method_options())  # one name per concept: a schedule's or a method's
    options = {**schedule_options(), **method_options()}
    config_fields = {f.name: f for f in dataclasses.fields(ICoTConfig)}
    for option in options.values():
        assert option.name in config_fields, option.name
        if option.name != "seed":  # TrainingArguments' own
            assert config_fields[option.name].default == option.default
            assert config_fields[option.name].metadata["help"] == option.help
            assert config_fields[option.name].metadata.get("choices") == (list(option.choices or []) or None)
    assert {f.name for f in dataclasses.fields(ScheduleArguments)} == {"schedule", *options} - {"seed"}
    # The flat names differ from the fields where a schedule's own name would be ambiguous; each maps back.
    assert options["adaptive_threshold"].fields == {"adaptive": "threshold"}
    assert options["remove_start_from"].fields == {"stepwise": "remove_start_from", "adaptive": "remove_start_from"}
    assert set(options["removal_fill"].fields) == set(SCHEDULES)
    assert options["removal_fill"].default is None and "pad for log_icot" in options["removal_fill"].help
    assert options["remove_start_from"].help.startswith("stepwise/adaptive: units removed")
    assert options["remove_per_epoch"].help.startswith("stepwise: CoT tokens")  # an acronym keeps its capitals


def test_schedule_arguments_is_generated_from_the_declarations_and_spells_out_every_option() -> None:
    """ScheduleArguments names each option as a literal typed field (what an IDE and a type checker read), and is the
    file its generator writes from the declarations now: a new or changed option fails here until it is regenerated."""
    import typing

    from hf_icot.training import declared_options as generator
    from hf_icot.training.schedule_arguments import ScheduleArguments

    source = generator.GENERATED.read_text(encoding="utf-8")
    assert source == generator.schedule_arguments_source(), f"ScheduleArguments is stale; run: {generator.COMMAND}"
    options = {name: option for name, option in generator.declared_options().items() if name != "seed"}
    (body,) = [node for node in ast.parse(source).body if isinstance(node, ast.ClassDef)]
    written = {
        node.target.id: node
        for node in body.body
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)
    }
    assert set(written) == {"schedule", *options}
    hints = typing.get_type_hints(ScheduleArguments)
    for name, option in options.items():
        expected = option.type if option.default is not None else option.type | None
        assert hints[name] == expected, name
        call = written[name].value
        assert isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id == "field", (
            name
        )  # a field a type checker understands
        assert [keyword.arg for keyword in call.keywords] == ["default", "metadata"], name
    # No other module of the library or the recipes declares an option by hand (the schedules' and methods' fields
    # are where they are declared; the config inherits them).
    for path in [*sorted((PACKAGE / "training").glob("*.py")), *sorted((REPO / "recipes").rglob("*.py"))]:
        if path == generator.GENERATED:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        declared = {
            node.target.id
            for node in ast.walk(tree)
            if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)
        }
        assert not declared & set(options), (path.name, declared & set(options))


def test_the_generator_names_its_command_when_the_file_is_stale(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from hf_icot.training import declared_options as generator

    stale = tmp_path / "schedule_arguments.py"
    stale.write_text(generator.GENERATED.read_text(encoding="utf-8").replace("    num_latent: int", "    n: int"))
    monkeypatch.setattr(generator, "GENERATED", stale)
    assert generator.main(["--check"]) == 1
    assert "run: python -m hf_icot.training.declared_options --write" in capsys.readouterr().err
    assert generator.main(["--write"]) == 0 and generator.main(["--check"]) == 0
    with pytest.raises(LookupError, match="regenerate ScheduleArguments: python -m hf_icot.training.declared_options"):
        generator.option_metadata("no_such_option")


def test_the_public_paths_users_copy_still_work() -> None:
    import hf_icot
    import hf_icot.data
    from hf_icot import ICoTConfig, ICoTTrainer
    from hf_icot.training.config import ICoTConfig as config_class
    from hf_icot.training.trainer import ICoTTrainer as trainer_class

    assert ICoTTrainer is trainer_class and ICoTConfig is config_class
    assert callable(hf_icot.data.load_icot_dataset)
    with pytest.raises(AttributeError, match="module 'hf_icot' has no attribute 'Trainer'"):
        hf_icot.Trainer  # noqa: B018


def test_the_wheel_imports_no_study_recipe_or_test_code() -> None:
    """What ``pip install hf_icot`` ships (``hf_icot/``, ``datasets_builder/``) stands alone: none of its modules
    imports from the folders the wheel leaves out (a study's own code, such as the parity theory models, lives in
    ``results/<study>/``)."""
    outside = ("results", "recipes", "bench", "tests")
    found = []
    for path in sorted([*PACKAGE.rglob("*.py"), *(REPO / "datasets_builder").rglob("*.py")]):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = [node.module] if isinstance(node, ast.ImportFrom) and node.module and node.level == 0 else []
            names += [alias.name for alias in node.names] if isinstance(node, ast.Import) else []
            found += [
                f"{path.relative_to(REPO)}:{node.lineno} imports {name}"
                for name in names
                if name.split(".")[0] in outside
            ]
    assert not found, "\n".join(found)


def test_a_run_folder_written_before_the_move_resumes_to_the_old_runs_own_weights(tmp_path: Path) -> None:
    from hf_icot.data.tokenization import build_word_level_tokenizer
    from hf_icot.training.config import ICoTConfig
    from hf_icot.training.trainer import ICoTTrainer
    from tests.hf_icot.tiny_task import counting_examples

    torch.set_num_threads(1)  # as the old run was made
    shutil.copytree(OLD_RUN / "run", tmp_path / "run")
    train, test = counting_examples(length=4, n_test=4)
    tokenizer = AutoTokenizer.from_pretrained(OLD_RUN / "run" / "checkpoint-4")
    assert tokenizer.get_vocab() == build_word_level_tokenizer([train, test]).get_vocab()
    args = ICoTConfig(output_dir=str(tmp_path / "run"), per_device_train_batch_size=4, learning_rate=1e-2,
                      max_steps=8, schedule="stepwise", remove_per_epoch=2, removal_smoothing_lambda=2.0,
                      reset_optimizer=True, save_strategy="steps", save_steps=4, logging_steps=1, report_to="none",
                      use_cpu=True, disable_tqdm=True, seed=3, keep_stage_checkpoints=False,
                      evaluate_each_stage=False)  # fmt: skip
    trainer = ICoTTrainer(model=AutoModelForCausalLM.from_pretrained(OLD_RUN / "init"), args=args,
                          train_dataset=train, eval_dataset=test, processing_class=tokenizer)  # fmt: skip
    trainer.train(resume_from_checkpoint=True)
    saved = json.loads((tmp_path / "run" / "checkpoint-4" / "trainer_state.json").read_text())
    assert saved["global_step"] == 4 and trainer.state.global_step == 8
    stored = saved["stateful_callbacks"]["ICoTStateCallback"]["attributes"]["schedule"]
    assert stored == {**trainer.schedule.to_dict(), "remove_per_epoch": 2}  # the old dict, field for field
    expected = load_file(OLD_RUN / "final_model.safetensors")
    got = {name: tensor.detach() for name, tensor in trainer.model.state_dict().items()}
    # Not bitwise: the old run's last four steps were taken on another CPU, whose kernels round differently (1.1e-5 on
    # an AMD EPYC, 1.4e-5 on an Intel Xeon). A resume that lost a piece of its state leaves the path by far more: 0.024
    # without rng_state.pth, 0.030 without optimizer.pt or scheduler.pt (the four steps move the weights by 0.0125).
    drift = max(float((expected[name] - got[name]).abs().max()) for name in expected)
    assert drift < 1e-4, f"the resumed run left the old one's path by {drift:.2e}"
