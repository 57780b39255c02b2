"""``tests.forked`` runs a command as ``python`` would: the same exit statuses, output, arguments, working directory
and environment, in a process of its own; and starts ``sys.executable`` where a forked child could not be faithful."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest

from tests import forked

SCRIPT = """
import atexit, os, signal, sys
atexit.register(lambda: print("atexit ran", flush=True))
print("argv", sys.argv[1:], "cwd", os.getcwd(), "pid", os.getpid(), "sid", os.getsid(0))
print("env", os.environ.get("ICOT_TEST_VALUE"), "main", __name__)
print("to stderr", file=sys.stderr)
action = sys.argv[1]
if action == "exit":
    sys.exit(int(sys.argv[2]))
if action == "message":
    sys.exit("error: a message")
if action == "raise":
    raise ValueError("boom")
if action == "kill":
    os.kill(os.getpid(), signal.SIGKILL)
if action == "child":  # a process of its own, as a main process may start (a daemonic one may not)
    import multiprocessing
    child = multiprocessing.get_context("fork").Process(target=print, args=("from its child",))
    child.start()
    child.join()
    sys.exit(child.exitcode)
"""


@pytest.fixture
def script(tmp_path: Path) -> Path:
    path = tmp_path / "script.py"
    path.write_text(SCRIPT, encoding="utf-8")
    return path


@pytest.mark.parametrize(
    "argv, status, last_stderr_line",
    [
        (["ok"], 0, "to stderr"),
        (["exit", "3"], 3, "to stderr"),
        (["message"], 1, "error: a message"),
        (["raise"], 1, "ValueError: boom"),
        (["kill"], -signal.SIGKILL, "to stderr"),
        (["child"], 0, "to stderr"),
    ],
)
def test_a_forked_run_exits_and_prints_as_python_does(
    script: Path, tmp_path: Path, argv: list[str], status: int, last_stderr_line: str
) -> None:
    env = {**os.environ, "ICOT_TEST_VALUE": "given"}
    env.pop("PYTHONUNBUFFERED", None)
    done = forked.run([script, *argv], env=env, cwd=tmp_path, timeout=120)
    assert done.returncode == status, done.stderr
    assert done.stderr.strip().splitlines()[-1] == last_stderr_line
    if status == -signal.SIGKILL:
        assert done.stdout == "", "stdout to a file is block-buffered, as python's: what it held dies with it"
        unbuffered = forked.run([script, *argv], env={**env, "PYTHONUNBUFFERED": "1"}, cwd=tmp_path, timeout=120)
        assert unbuffered.returncode == status and unbuffered.stdout.count("\n") == 2, "written through"
        return
    lines = done.stdout.splitlines()
    assert lines[0].startswith(f"argv {argv} cwd {tmp_path} pid ")
    assert int(lines[0].split(" pid ")[1].split()[0]) != os.getpid()
    assert lines[1] == "env given main __main__"
    assert lines[-1] == "atexit ran"
    assert ("from its child" in lines) == (argv == ["child"])


def test_a_new_session_and_a_module_run_with_minus_m(tmp_path: Path) -> None:
    (tmp_path / "probe_module.py").write_text(SCRIPT, encoding="utf-8")
    done = forked.run(["-m", "probe_module", "ok"], cwd=tmp_path, start_new_session=True, timeout=120)
    assert done.returncode == 0, done.stderr
    pid, sid = done.stdout.split(" pid ")[1].split()[0], done.stdout.split(" sid ")[1].split()[0]
    assert pid == sid, "the child leads a session of its own"


def test_a_started_run_can_be_signalled_and_logs_both_streams_to_one_file(tmp_path: Path) -> None:
    waiting = tmp_path / "wait.py"
    waiting.write_text("import time\nprint('waiting', flush=True)\ntime.sleep(120)\n", encoding="utf-8")
    log = tmp_path / "log.txt"
    started = forked.start([waiting], log=log)
    for _ in range(600):
        if "waiting" in log.read_text():
            break
        assert started.poll() is None
        time.sleep(0.1)
    started.send_signal(signal.SIGTERM)
    assert started.wait(timeout=60) == -signal.SIGTERM
    assert log.read_text() == "waiting\n"


def test_what_a_fork_cannot_give_starts_a_fresh_interpreter_and_says_why(script: Path, tmp_path: Path) -> None:
    env = {**os.environ, "HF_ENDPOINT": "http://127.0.0.1:1"}
    with pytest.warns(
        UserWarning, match=r"starts a fresh interpreter: .* differs from the fork server's in \['HF_ENDPOINT'\]"
    ):
        done = forked.run([script, "ok"], env=env, cwd=tmp_path, timeout=120)
    assert done.returncode == 0 and "atexit ran" in done.stdout
    assert forked.launcher(["-m", "accelerate.commands.launch", "x.py"]) and forked.launcher(["-c", "pass"])
    assert not forked.launcher(["-m", "tests.recipes.killed_recipe"]) and not forked.launcher(["recipes/icot_gpt2.py"])
