"""Python command lines run in processes forked from a server that has already imported the training stack.

A test that runs a recipe as its user does (``python recipes/icot_gpt2.py ...``, ``python -m tests.recipes.killed_recipe
...``) pays ~7 s of interpreter start and imports (torch, transformers' ``Trainer``, datasets, peft) before the
recipe's first line runs; the kill, resume, preemption and refusal tests start dozens of them. ``run`` and ``start``
start such a command in a child of one ``multiprocessing`` fork server per test process, started on first use with
the environment the test session began with and ``PRELOAD`` imported, nothing else (no pytest state, no earlier
test's leftovers). The child begins where a fresh interpreter would be after those imports, runs the script or
module as ``__main__`` with the given arguments, environment, working directory and standard streams, and exits as
``python`` would: the status of ``SystemExit`` (its message printed, status 1, when it is not a number), status 1
with the traceback printed for an exception, ``-N`` when killed by signal N, the ``atexit`` functions run. It is a
real process: signals, SIGKILL, process groups, file locks and exit statuses are its own.

What a forked child cannot show: the interpreter start and the imports themselves (``--help`` time, a module that
fails to import in a fresh interpreter), so the tests of those call ``subprocess`` directly. And what it cannot be
given, for which ``run``/``start`` start ``sys.executable`` themselves: an environment that differs from the server's
in anything but ``RUN_TIME`` (a preloaded library may have read it at import: ``HF_ENDPOINT``, ``OMP_NUM_THREADS``,
the caches; a warning names what differs, since such a run is slower), and launchers (``accelerate launch`` starts
interpreters of its own)."""

from __future__ import annotations

import atexit
import io
import multiprocessing
import multiprocessing.forkserver
import os
import runpy
import signal
import subprocess
import sys
import tempfile
import time
import traceback
import warnings
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
#: What the server imports once: everything a recipe run imports before its first step, ~7 s in a fresh interpreter.
PRELOAD = [
    "torch",
    "transformers",
    "transformers.trainer",
    "transformers.models.gpt2.modeling_gpt2",
    "transformers.models.llama.modeling_llama",
    "datasets",
    "accelerate",
    "peft",
    "hf_icot.training.trainer",
    "hf_icot.command_line.recipe",
    "recipes.icot_gpt2",
    "evaluate",
    "matplotlib.pyplot",
]
#: Environment variables no library reads at import, which a forked child may therefore set to its own values:
#: ``PYTHONPATH`` (the child's ``sys.path`` is this process's, which holds the repository), pytest's name of the
#: running test, ``COLUMNS`` (argparse reads it as it formats), ``TORCHINDUCTOR_CACHE_DIR`` (torch sets it to its
#: default the first time it needs that cache, in the test process as in the child), ``PYTHONUNBUFFERED`` (the child
#: opens its standard streams by it), and the tests' own ``ICOT_TEST_*`` settings.
RUN_TIME = ("PYTHONPATH", "PYTEST_CURRENT_TEST", "COLUMNS", "TORCHINDUCTOR_CACHE_DIR", "PYTHONUNBUFFERED")
#: The environment the session began with (tests/conftest.py's settings included): the server's, whatever a test
#: has set when it first starts a command.
SESSION_ENV = dict(os.environ)

_context: multiprocessing.context.ForkServerContext | None = None
_outputs: tempfile.TemporaryDirectory | None = None  # the children's stdout and stderr files, removed at exit


def _server() -> multiprocessing.context.ForkServerContext:
    """The fork server, started with ``SESSION_ENV`` and ``PRELOAD`` imported on first use."""
    global _context
    if _context is None:
        context = multiprocessing.get_context("forkserver")
        context.set_forkserver_preload(PRELOAD)
        current = dict(os.environ)
        os.environ.clear()
        os.environ.update(SESSION_ENV)
        try:
            multiprocessing.forkserver.ensure_running()
        finally:
            os.environ.clear()
            os.environ.update(current)
        _context = context
    return _context


def _stream(fd: int, line_buffering: bool, unbuffered: bool) -> io.TextIOWrapper:
    """A standard stream to a file as python opens it: stdout block-buffered, stderr line-buffered, both written
    through under ``PYTHONUNBUFFERED``."""
    return io.TextIOWrapper(io.FileIO(fd, "w", closefd=False), encoding="utf-8", errors="backslashreplace",
                            line_buffering=line_buffering, write_through=unbuffered)  # fmt: skip


def _child(args: list[str], env: dict[str, str], cwd: str, stdout: str, stderr: str, new_session: bool) -> None:
    """In the forked process: become ``python *args`` and exit as it would."""
    this = multiprocessing.current_process()  # named and numbered as a fresh interpreter's main process, no parent
    this._name, this._identity = "MainProcess", ()
    this._config.pop("daemon", None)  # daemonic for the test process only (see start): it may start processes
    multiprocessing.process._parent_process = None
    if new_session:
        os.setsid()
    os.chdir(cwd)
    os.environ.clear()
    os.environ.update(env)
    for fd, path in ((0, os.devnull), (1, stdout), (2, stderr)):  # stderr may be stdout's file: both append
        target = os.open(path, os.O_RDONLY if fd == 0 else os.O_WRONLY | os.O_APPEND)
        os.dup2(target, fd)
        os.close(target)
    sys.stdin = io.TextIOWrapper(io.FileIO(0, "r", closefd=False))
    unbuffered = bool(env.get("PYTHONUNBUFFERED"))
    sys.stdout = sys.__stdout__ = _stream(1, line_buffering=False, unbuffered=unbuffered)
    sys.stderr = sys.__stderr__ = _stream(2, line_buffering=True, unbuffered=unbuffered)
    code = 0
    try:
        if args[0] == "-m":
            sys.argv = [args[1], *args[2:]]
            sys.path.insert(0, cwd)
            runpy.run_module(args[1], run_name="__main__", alter_sys=True)
        else:
            sys.argv = list(args)
            sys.path.insert(0, str(Path(cwd, args[0]).resolve().parent))
            runpy.run_path(args[0], run_name="__main__")
    except SystemExit as exited:
        if exited.code is None:
            code = 0
        elif isinstance(exited.code, int):
            code = exited.code
        else:
            print(exited.code, file=sys.stderr)
            code = 1
    except BaseException:  # noqa: BLE001 - printed as the interpreter prints it, exit status 1
        traceback.print_exc()
        code = 1
    atexit._run_exitfuncs()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


class Started:
    """A started command, as much of ``subprocess.Popen`` as the tests use: ``pid``, ``poll``, ``wait``,
    ``send_signal``, ``kill``, ``returncode``, and its standard output and error as text (``output``)."""

    def __init__(self, args: list[str], process: multiprocessing.process.BaseProcess | subprocess.Popen,
                 paths: tuple[Path, Path]) -> None:  # fmt: skip
        self.args, self._process, self._paths = args, process, paths

    @property
    def pid(self) -> int:
        return self._process.pid

    @property
    def returncode(self) -> int | None:
        return self.poll()

    def poll(self) -> int | None:
        if isinstance(self._process, subprocess.Popen):
            return self._process.poll()
        return self._process.exitcode

    def wait(self, timeout: float | None = None) -> int:
        if isinstance(self._process, subprocess.Popen):
            return self._process.wait(timeout)
        self._process.join(timeout)
        if self._process.exitcode is None:
            raise subprocess.TimeoutExpired(self.args, timeout)
        return self._process.exitcode

    def send_signal(self, number: int) -> None:
        if self.poll() is None:
            os.kill(self.pid, number)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def output(self, name: str) -> str:
        """What the command wrote so far to ``stdout`` or ``stderr``."""
        path = self._paths[("stdout", "stderr").index(name)]
        return path.read_text(encoding="utf-8", errors="backslashreplace")

    def completed(self) -> subprocess.CompletedProcess:
        return subprocess.CompletedProcess(self.args, self.wait(), self.output("stdout"), self.output("stderr"))


def launcher(args: list[str]) -> bool:
    """Whether ``python *args`` is not a script or a module of ours but an interpreter option or ``accelerate
    launch``, which starts interpreters of its own."""
    return args[0].startswith("-") and args[0] != "-m" or args[:2] == ["-m", "accelerate.commands.launch"]


def unforkable_environment(env: dict[str, str]) -> list[str]:
    """The names whose value in ``env`` differs from the server's (``SESSION_ENV``), but for ``RUN_TIME`` names and
    ``ICOT_TEST_*``: a preloaded library may have read them at import."""
    names = (set(env) | set(SESSION_ENV)) - set(RUN_TIME)
    return sorted(n for n in names if env.get(n) != SESSION_ENV.get(n) and not n.startswith("ICOT_TEST_"))


def start(args: list[str | Path], env: dict[str, str] | None = None, cwd: Path = REPO,
          start_new_session: bool = False, log: Path | None = None) -> Started:  # fmt: skip
    """Start ``python *args`` (a script and its arguments, or ``-m`` and a module) in ``cwd`` with ``env`` (default:
    this process's) as its environment: forked from the server, or by ``sys.executable`` for a ``launcher`` or an
    environment the server cannot give (with a warning naming what differs, since the run is then slower). Its
    standard output and error go to files of their own, or both to ``log`` (as ``stderr=subprocess.STDOUT``)."""
    global _outputs
    args = [str(arg) for arg in args]
    env = dict(os.environ if env is None else env)
    if _outputs is None:
        _outputs = tempfile.TemporaryDirectory(prefix="forked_")
    folder = tempfile.mkdtemp(dir=_outputs.name)
    paths = (Path(log), Path(log)) if log is not None else (Path(folder, "stdout"), Path(folder, "stderr"))
    for path in paths:
        path.write_text("")
    is_launcher = launcher(args)
    differing = [] if is_launcher else unforkable_environment(env)
    if differing:
        warnings.warn(f"{args[:2]} starts a fresh interpreter: its environment differs from the fork server's in "
                      f"{differing}", stacklevel=2)  # fmt: skip
    if is_launcher or differing:
        with open(paths[0], "a") as stdout, open(paths[1], "a") as stderr:
            popen = subprocess.Popen([sys.executable, *args], cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                                     stdout=stdout, stderr=stderr, start_new_session=start_new_session)  # fmt: skip
        return Started(args, popen, paths)
    # daemon: a child a failed test left running is ended when its test process exits, not waited for
    process = _server().Process(
        target=_child, args=(args, env, str(cwd), *map(str, paths), start_new_session), daemon=True
    )
    process.start()
    return Started(args, process, paths)


def run(args: list[str | Path], env: dict[str, str] | None = None, cwd: Path = REPO, timeout: float = 300,
        start_new_session: bool = False) -> subprocess.CompletedProcess:  # fmt: skip
    """``subprocess.run([sys.executable, *args], capture_output=True, text=True, ...)`` as ``start`` starts it: its
    exit status and output; on ``timeout`` the child is killed and ``subprocess.TimeoutExpired`` raised."""
    started = start(args, env=env, cwd=cwd, start_new_session=start_new_session)
    deadline = time.monotonic() + timeout
    try:
        started.wait(max(0.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        started.kill()
        started.wait()
        raise
    return started.completed()
