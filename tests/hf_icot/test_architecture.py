"""The library's rooms: no import circle, no module over ~450 lines, every schedule field declared once, the public
paths users copy, and a run folder written before the layout move still loading and resuming exactly."""

from __future__ import annotations

import ast
import dataclasses
import json
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


def _top_level_imports(path: Path, module: str, modules: set[str]) -> set[str]:
    """The hf_icot modules ``path`` imports when it is imported (module level, not inside functions or
    ``TYPE_CHECKING``); ``from package import submodule`` counts as the submodule."""
    found = set()
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [f"{node.module}.{alias.name}" for alias in node.names]
            found.update(name if name in modules else node.module for name in names)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return found & modules


def test_the_module_level_import_graph_has_no_circle() -> None:
    modules = {name: REPO / (name.replace(".", "/") + ".py") for name in library_modules()}
    modules = {
        name: path if path.is_file() else path.with_suffix("") / "__init__.py" for name, path in modules.items()
    }
    graph = {name: _top_level_imports(path, name, set(modules)) for name, path in modules.items()}

    def circle_from(start: str, node: str, seen: list[str]) -> list[str] | None:
        for nxt in graph[node]:
            if nxt == start:
                return [*seen, nxt]
            if nxt not in seen:
                found = circle_from(start, nxt, [*seen, nxt])
                if found:
                    return found
        return None

    circles = [circle for name in graph if (circle := circle_from(name, name, [name]))]
    assert not circles, f"import circle: {' -> '.join(circles[0])}"


#: The rooms bottom up (the order of hf_icot/__init__.py's docstring and docs/architecture.md): a module may import its
#: own room and those below it. Evaluation and publishing sit side by side; methods (continuous thoughts) between the
#: models they run and the evaluation that generates with them.
ROOM_ORDER = {
    "_lazy": 0, "cot": 0, "errors": 0, "locations": 0, "curriculum": 1, "data": 2, "modeling": 3, "methods": 4,
    "evaluation": 5, "publishing": 5, "hub": 5, "levers": 6, "runs": 6, "training": 7, "diagnostics": 8,
    "command_line": 8, "studies": 9,
}  # fmt: skip


def _every_import(path: Path) -> list[tuple[int, str]]:
    """``(line, module)`` of every hf_icot import in ``path``: module level, inside functions and under
    ``TYPE_CHECKING`` alike; ``from hf_icot import x`` counts as ``hf_icot.x``."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module == "hf_icot":
                found += [(node.lineno, f"hf_icot.{alias.name}") for alias in node.names]
            elif node.module.startswith("hf_icot."):
                found.append((node.lineno, node.module))
        elif isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names if alias.name.startswith("hf_icot.")]
    return found


def test_no_import_points_up_the_rooms_not_even_inside_a_function() -> None:
    upward, counted = [], 0
    for path in sorted(PACKAGE.rglob("*.py")):
        room = path.relative_to(PACKAGE).parts[0].removesuffix(".py")
        if room == "__init__":  # the package's public names, loaded on use
            continue
        assert room in ROOM_ORDER, f"hf_icot/{room} is in no room: add it to ROOM_ORDER (and to docs/architecture.md)"
        for line, module in _every_import(path):
            counted += 1
            target = module.split(".")[1]
            if ROOM_ORDER.get(target, -1) > ROOM_ORDER[room]:
                upward.append(f"{path.relative_to(REPO)}:{line} imports {module}")
    assert counted > 150, counted  # every import is read, function-level ones included
    assert not upward, "imports that point up the rooms:\n" + "\n".join(upward)


def test_the_light_rooms_import_without_torch() -> None:
    code = (
        "import sys, hf_icot, hf_icot.curriculum, hf_icot.data, hf_icot.evaluation, hf_icot.evaluation.prompts, "
        "hf_icot.training, hf_icot.studies.sweep, hf_icot.studies.runner, hf_icot.studies.claims, "
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
