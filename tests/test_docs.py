"""The front page and docs/ stay true: the README's Python example runs as written, and every path, module and dotted
name that docs/architecture.md gives exists."""

from __future__ import annotations

import ast
import os
import re
import shlex
from pathlib import Path

from tests import forked

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
ARCHITECTURE = REPO / "docs" / "architecture.md"
TOP_LEVEL = ("hf_icot/", "datasets_builder/", "recipes/", "results/", "bench/", "tests/", "docs/", "model_cards/")


def _blocks(text: str, language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", text, flags=re.S)


def test_the_readme_python_example_runs_as_written(tmp_path: Path) -> None:
    readme = README.read_text(encoding="utf-8")
    build = [
        line for block in _blocks(readme, "bash") for line in block.splitlines() if "datasets_builder build" in line
    ]
    assert len(build) == 1, "the README shows one dataset build for its Python example"
    (python_block,) = _blocks(readme, "python")
    assert "load_icot_dataset" in python_block and "ICoTConfig" in python_block and "ICoTTrainer" in python_block
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(REPO)}
    # Each command in a process of its own, forked from the session's pre-imported server (tests/forked.py).
    built = forked.run(["-m", *shlex.split(build[0])[2:], "--no-progress"], cwd=tmp_path, env=env)
    assert built.returncode == 0, built.stderr[-3000:]
    (tmp_path / "example.py").write_text(python_block, encoding="utf-8")
    result = forked.run(["example.py"], cwd=tmp_path, env=env, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    metrics = ast.literal_eval(result.stdout.strip().splitlines()[-1])
    assert 0 <= metrics["eval_implicit/answer_em"] <= 1 and 0 <= metrics["eval_explicit/cot_em"] <= 1


def _exists(path: str) -> bool:
    return (REPO / path.rstrip("/")).exists()


def _module_exists(dotted: str) -> bool:
    """``hf_icot.a.b`` is a module, or ``hf_icot.a.b.name`` a name defined at the top of module ``hf_icot.a.b``."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        base = REPO.joinpath(*parts[:cut])
        source = base.with_suffix(".py") if base.with_suffix(".py").is_file() else base / "__init__.py"
        if source.is_file():
            rest = parts[cut:]
            if not rest:
                return True
            tree = ast.parse(source.read_text(encoding="utf-8"))
            defined = set()
            for node in tree.body:
                if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
                    defined.add(node.name)
                elif isinstance(node, ast.Assign):
                    defined.update(target.id for target in node.targets if isinstance(target, ast.Name))
                elif isinstance(node, ast.ImportFrom):
                    defined.update(alias.asname or alias.name for alias in node.names)
            return len(rest) == 1 and rest[0] in defined
    return False


def _bullets(text: str) -> list[tuple[str, str]]:
    """``(folder, text)`` of each top-level bullet that opens with a backticked path."""
    return re.findall(r"^\* `([^`]+)` — (.*?)(?=^\* |^\S|\Z)", text, flags=re.S | re.M)


def test_every_path_and_module_named_in_the_architecture_page_exists() -> None:
    text = ARCHITECTURE.read_text(encoding="utf-8")
    missing = []
    for token in re.findall(r"`([^`\s]+)`", text):
        if token.startswith(TOP_LEVEL) and not set("<*{") & set(token):
            missing += [] if _exists(token) else [token]
        elif re.fullmatch(r"(hf_icot|datasets_builder)(\.\w+)+", token):
            missing += [] if _module_exists(token) else [token]
    bullets = _bullets(text)
    assert len(bullets) >= 10, "the page lists the rooms as bullets that open with their folder"
    modules_named = 0
    for folder, body in bullets:
        if folder.startswith("hf_icot/") and folder.endswith("/"):
            # A room's modules are named in parentheses: "(`loading`)", "(`checkpoints`, `run_folder`)".
            for group in re.findall(r"\(((?:`[a-z_][a-z0-9_]*/?`(?:, )?)+)", body):
                for name in re.findall(r"`([^`]+)`", group):
                    modules_named += 1
                    path = f"{folder}{name}"
                    missing += [] if _exists(path) or _exists(path + ".py") else [path]
        elif folder in ("recipes/", "bench/"):
            for name in re.findall(r"`([\w/]+\.py)`", body):
                missing += [] if _exists(folder + name) else [folder + name]
    assert modules_named >= 20, modules_named
    assert not missing, f"docs/architecture.md names what does not exist: {missing}"


def test_the_readme_links_the_docs_and_stays_a_front_page() -> None:
    readme = README.read_text(encoding="utf-8")
    assert len(readme.splitlines()) <= 150
    for target in re.findall(r"\]\(([^)#]+)\)", readme):
        if not target.startswith("http"):
            assert _exists(target), target
    for page in ("docs/architecture.md", "docs/methods.md", "docs/reliability.md", "docs/studies.md",
                 "docs/benchmarks.md", "results/CLAIMS.md", "bench/README.md", "CHANGELOG.md"):  # fmt: skip
        assert f"]({page})" in readme, page
    ci = (REPO / ".ci" / "run").read_text(encoding="utf-8").strip().splitlines()[-1]
    title, blank, sentence = readme.splitlines()[:3]
    assert title == "# hf_icot" and not blank and sentence.startswith("hf_icot is "), "one sentence under the title"
    commands = _blocks(readme, "bash")[0].splitlines()
    assert ci in commands and commands.index(ci) == 3, "`.ci/run` runs exactly the README's test command (command 2)"
