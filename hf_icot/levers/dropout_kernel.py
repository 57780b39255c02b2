"""torch's CPU dropout masks from a small C kernel: the same numbers as torch's own draw, several times faster.

torch's CPU ``bernoulli_`` (the mask of every CPU ``torch.nn.functional.dropout``) runs its Mersenne Twister one
element after another, two 32-bit words an element, ~7.5 ns an element here. ``dropout_kernel.c``, beside this file,
computes the same words and comparisons from the generator's state (``Generator.get_state()``), writes the scaled
mask dropout multiplies by, and gives the generator back its state advanced as torch's own draw would have left it
(0.8 ns an element with AVX2 on this 2-core AMD EPYC; ``bench/bench_dropout_draws.py``). Only the lever
``draw_dropout_ahead`` (:mod:`~hf_icot.levers.dropout_ahead`, off by default) uses it.

It is compiled on first use by the machine's C compiler (``$CC``, else ``cc``) and loaded with :mod:`ctypes`; nothing
is downloaded. Not ``torch.utils.cpp_extension``: the kernel is plain C on the generator state's bytes, with no torch
header or Python binding to build, and ``cpp_extension.load`` would compile it as a C++ extension against torch's
headers with ninja (seconds to tens of seconds, a dependency more) into ``~/.cache/torch_extensions``, which loads
what it finds there by name just as this module used to.

Only a library this user built is loaded. The cache, ``$XDG_CACHE_HOME/hf_icot/kernels`` (``~/.cache`` by default),
is a folder of this user's with mode 0700: created so; made so again if it was writable by group or others (then
nothing already in it is used); another user's folder, or a link, is not used at all (a fresh private folder in the
temporary directory serves this process). A build is named by a hash of the source and the flags, written with mode
0700, and its SHA-256 is recorded beside it (``<name>.so.sha256``, mode 0600) at build time. Before loading, the open
file (the one then loaded, through ``/proc/self/fd`` where there is one) must be owned by this user, not writable by
group or others, and of the recorded SHA-256, and so must the record; otherwise it is refused, the reason logged, and
it is built again.

Exactness is checked, not assumed: after loading, masks that cross the generator's 624-word refills and start at odd
word offsets must equal torch's own, bit for bit, and leave the generator's state where torch's leave it;
``DropoutDrawsAhead`` checks it again on the masks of a run's first forward (torch uses oneMKL's stream instead on
some CPUs, where the check fails). Anything else — no compiler, a build that fails, a disagreement, a dtype other than
float32, ``HF_ICOT_DROPOUT_KERNEL=0`` in the environment — draws with torch, and the reason is logged once.
"""

from __future__ import annotations

import atexit
import ctypes
import functools
import hashlib
import logging
import math
import os
import shutil
import stat
import subprocess
import tempfile
import threading
from pathlib import Path

import torch

logger = logging.getLogger(__name__)

SOURCE = Path(__file__).with_name("dropout_kernel.c")
#: ``Generator.get_state()`` of torch's CPU generator: the Mersenne Twister's words and where it reads next.
STATE_BYTES = 5056

_lock = threading.Lock()
_loaded: dict[str, DropoutKernel | None] = {}
_reason: dict[str, str] = {}


def _empty(shape: tuple[int, ...], dtype: torch.dtype, stride: tuple[int, ...] | None) -> torch.Tensor:
    return torch.empty(shape, dtype=dtype) if stride is None else torch.empty_strided(shape, stride, dtype=dtype)


def torch_dropout_mask(
    shape: tuple[int, ...],
    dtype: torch.dtype,
    p: float,
    generator: torch.Generator | None = None,
    stride: tuple[int, ...] | None = None,
) -> torch.Tensor:
    """The scaled mask torch's CPU dropout draws (``empty_like(input).bernoulli_(1 - p).div_(1 - p)``); ``stride``
    is that of ``empty_like(input)`` where it is not contiguous (torch draws in memory order)."""
    return _empty(shape, dtype, stride).bernoulli_(1 - p, generator=generator).div_(1 - p)


class DropoutKernel:
    """The compiled kernel: :meth:`mask` draws what :func:`torch_dropout_mask` draws, for float32."""

    def __init__(self, library: ctypes.CDLL) -> None:
        self._function = library.hf_icot_dropout_mask
        self._function.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64, ctypes.c_uint64, ctypes.c_float]
        self._function.restype = None

    def mask(
        self,
        shape: tuple[int, ...],
        p: float,
        generator: torch.Generator | None = None,
        stride: tuple[int, ...] | None = None,
    ) -> torch.Tensor:
        generator = torch.default_generator if generator is None else generator
        state = generator.get_state()
        out = _empty(shape, torch.float32, stride)  # dense: the kernel writes its memory in order, as torch draws
        self._function(state.data_ptr(), out.data_ptr(), out.numel(), *_threshold_and_scale(p))  # ctypes frees the GIL
        generator.set_state(state)
        return out


@functools.cache
def _threshold_and_scale(p: float) -> tuple[int, float]:
    """For a drop probability ``p``: ``ceil((1 - p) * 2^53)`` (u = v / 2^53 < 1 - p, exactly, for the 53-bit integer v)
    and the float torch's ``div_(1 - p)`` makes of a drawn 1."""
    keep = 1 - p
    return math.ceil(keep * 2**53), torch.ones(1).div_(keep).item()


def loaded() -> DropoutKernel | None:
    """The kernel, built and checked on first use in this process; ``None`` (with :func:`why_not`) where torch draws."""
    with _lock:
        if "kernel" not in _loaded:
            kernel, reason = _load()
            _loaded["kernel"] = kernel
            if reason:
                _reason["kernel"] = reason
                logger.info("dropout masks are drawn by torch, not the C kernel: %s", reason)
        return _loaded["kernel"]


def in_use() -> bool:
    """Whether this process has loaded the kernel and draws with it (without building it if it has not)."""
    return _loaded.get("kernel") is not None


def why_not() -> str | None:
    """Why :func:`loaded` gave ``None`` (or a later check turned the kernel off); ``None`` while it is in use."""
    return _reason.get("kernel")


def turn_off(reason: str) -> None:
    """Draw with torch for the rest of this process (a check found the kernel disagreeing with torch)."""
    with _lock:
        _loaded["kernel"] = None
        _reason["kernel"] = reason
    logger.warning("dropout masks are drawn by torch from now on: %s", reason)


def _load() -> tuple[DropoutKernel | None, str | None]:
    if os.environ.get("HF_ICOT_DROPOUT_KERNEL", "").strip() == "0":
        return None, "HF_ICOT_DROPOUT_KERNEL=0 in the environment"
    if torch.default_generator.get_state().numel() != STATE_BYTES:
        return None, f"torch's CPU generator state is not the {STATE_BYTES}-byte Mersenne Twister state it knows"
    try:
        library = _built()
        descriptor = _open_checked(library)
        try:  # the file checked is the file loaded, even if the path changes meanwhile
            opened = Path(f"/proc/self/fd/{descriptor}")
            kernel = DropoutKernel(ctypes.CDLL(str(opened if opened.exists() else library)))
        finally:
            os.close(descriptor)
    except (OSError, subprocess.SubprocessError, RuntimeError) as error:
        return None, str(error)
    disagreement = _disagreement(kernel)
    return (None, disagreement) if disagreement else (kernel, None)


class Refused(RuntimeError):
    """A cached kernel file that this user did not build, or whose bytes are not the ones recorded; the message says
    which and why."""


def record_of(library: Path) -> Path:
    """The file holding the SHA-256 recorded when ``library`` was built."""
    return library.with_name(library.name + ".sha256")


def _open_checked(path: Path) -> int:
    """An open descriptor of ``path`` (a symbolic link is refused), once the open file is shown to be owned by this
    user and not writable by group or others; with ``.so`` files, also of the SHA-256 in :func:`record_of`.

    Raises:
        FileNotFoundError: ``path`` does not exist.
        Refused: it exists and fails a check (the message names the file and the check).
    """
    try:
        descriptor = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except FileNotFoundError:
        raise
    except OSError as error:
        raise Refused(f"{path} cannot be opened as a plain file ({error.strerror})") from None
    try:
        info = os.fstat(descriptor)
        if info.st_uid != os.geteuid():
            raise Refused(f"{path} is owned by uid {info.st_uid}, not by this user (uid {os.geteuid()})")
        if stat.S_IMODE(info.st_mode) & 0o022:
            raise Refused(f"{path} is writable by group or others (mode {stat.S_IMODE(info.st_mode):o})")
        if path.suffix == ".so":
            expected = _recorded_hash(path)
            if _hash_of(descriptor) != expected:
                raise Refused(f"{path} does not match the SHA-256 recorded when it was built")
    except BaseException:
        os.close(descriptor)
        raise
    return descriptor


def _recorded_hash(library: Path) -> str:
    """The SHA-256 recorded when ``library`` was built, from a record that passes the same owner and mode checks."""
    record = record_of(library)
    try:
        descriptor = _open_checked(record)
    except FileNotFoundError:
        raise Refused(f"{library} has no SHA-256 recorded beside it ({record.name})") from None
    with os.fdopen(descriptor, "rb") as stream:
        return stream.read(200).decode("ascii", "replace").strip()


def _hash_of(descriptor: int) -> str:
    digest = hashlib.sha256()
    os.lseek(descriptor, 0, os.SEEK_SET)
    while chunk := os.read(descriptor, 1 << 16):
        digest.update(chunk)
    return digest.hexdigest()


def _private_folder() -> tuple[Path, bool]:
    """The folder to build into and load from, and whether a kernel already in it may be used.

    The cache folder (``$XDG_CACHE_HOME/hf_icot/kernels``): created with mode 0700; made 0700 again if it was
    writable by group or others, its kernels then built again; if it is another user's, or not a plain folder, a fresh
    private folder in the temporary directory for this process instead (removed at exit). Each case but the first
    logs why."""
    folder = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "hf_icot" / "kernels"
    folder.parent.mkdir(parents=True, exist_ok=True)
    try:
        folder.mkdir(mode=0o700)
        os.chmod(folder, 0o700)  # whatever the umask
        return folder, True
    except FileExistsError:
        pass
    info = os.lstat(folder)
    mode = stat.S_IMODE(info.st_mode)
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.geteuid():
        why = (
            f"owned by uid {info.st_uid}, not by this user (uid {os.geteuid()})"
            if stat.S_ISDIR(info.st_mode)
            else "a link or a file, not a folder"
        )
        fresh = Path(tempfile.mkdtemp(prefix="hf_icot-kernels-"))  # mode 0700, this user's
        atexit.register(shutil.rmtree, fresh, ignore_errors=True)
        logger.warning("not using the kernel cache %s (%s); building in %s for this process", folder, why, fresh)
        return fresh, False
    if mode != 0o700:
        os.chmod(folder, 0o700)
        if mode & 0o022:
            logger.warning(
                "the kernel cache %s was writable by group or others (mode %o): made private (0700), and the kernel "
                "in it is built again",
                folder,
                mode,
            )
            return folder, False
    return folder, True


def _built() -> Path:
    """The shared library, compiled into this user's private cache folder (:func:`_private_folder`) unless a build of
    the same source and flags that this user made is there already (:func:`_open_checked`: a cached file that fails a
    check is refused, the reason logged, and built again)."""
    compiler = shutil.which(os.environ.get("CC") or "cc")
    if compiler is None:
        raise RuntimeError(f"no C compiler: {os.environ.get('CC') or 'cc'} is not on PATH (set CC to one)")
    flags = ["-O3", "-shared", "-fPIC"]
    if torch.backends.cpu.get_cpu_capability() in ("AVX2", "AVX512"):
        flags.append("-mavx2")  # this CPU has it: the name below keeps an AVX2 build from a machine without
    key = hashlib.sha256(SOURCE.read_bytes() + " ".join([compiler, *flags]).encode()).hexdigest()[:16]
    folder, trusted = _private_folder()
    library = folder / f"dropout_kernel-{key}.so"
    if trusted:
        try:
            os.close(_open_checked(library))
            return library
        except FileNotFoundError:
            pass
        except Refused as refusal:
            logger.warning("refusing the cached dropout kernel: %s; building it again", refusal)
    with tempfile.TemporaryDirectory(dir=folder) as scratch:
        built = Path(scratch) / library.name
        result = subprocess.run(
            [compiler, *flags, "-o", str(built), str(SOURCE)], capture_output=True, text=True, timeout=120
        )
        if result.returncode != 0:
            first = (result.stderr.strip().splitlines() or ["no message"])[0]
            raise RuntimeError(f"{compiler} could not build {SOURCE.name} (exit {result.returncode}): {first}")
        os.chmod(built, 0o700)  # whatever the umask: a group-writable build would be refused
        record = record_of(built)
        record.write_text(hashlib.sha256(built.read_bytes()).hexdigest() + "\n", encoding="ascii")
        os.chmod(record, 0o600)
        # Each file whole or not at all, for processes that build at the same time (a library that meets another's
        # record is refused and built again by the next process).
        os.replace(record, record_of(library))
        os.replace(built, library)
    return library


def _disagreement(kernel: DropoutKernel) -> str | None:
    """Where the kernel's masks or generator state differ from torch's own draw on the same state; ``None`` if nowhere.

    Sizes around the 624-word refill (an element takes two words, so 312 elements fill a block), after 0-3 words
    already read (an element may straddle a refill), at several probabilities."""
    ours, torch_own = torch.Generator(), torch.Generator()
    for seed, offset in ((0, 0), (1, 1), (2, 3), (3, 2)):
        ours.manual_seed(seed)
        torch.rand(offset, generator=ours)  # a float takes one word: the next mask starts off the pair boundary
        torch_own.set_state(ours.get_state())
        for size, p in ((1, 0.1), (311, 0.5), (313, 0.1), (624, 0.3), (5000, 1 / 3), (7, 0.9)):
            expected = torch_dropout_mask((size,), torch.float32, p, torch_own)
            if not torch.equal(kernel.mask((size,), p, ours), expected):
                return f"its mask of {size} elements at p={p} differs from torch's (torch draws another way here)"
            if not torch.equal(ours.get_state(), torch_own.get_state()):
                return f"it leaves the generator elsewhere than torch does after {size} elements"
    return None
