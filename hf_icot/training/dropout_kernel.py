"""torch's CPU dropout masks from a small C kernel: the same numbers as torch's own draw, several times faster.

torch's CPU ``bernoulli_`` (the mask of every CPU ``torch.nn.functional.dropout``) runs its Mersenne Twister one
element after another, two 32-bit words an element, ~7.5 ns an element here. ``dropout_kernel.c``, beside this file,
computes the same words and comparisons from the generator's state (``Generator.get_state()``), writes the scaled
mask dropout multiplies by, and gives the generator back its state advanced as torch's own draw would have left it
(0.8 ns an element with AVX2 on this 2-core AMD EPYC; ``bench/bench_dropout_draws.py``).

It is compiled on first use by the machine's C compiler (``$CC``, else ``cc``) into
``$XDG_CACHE_HOME/hf_icot/kernels`` (``~/.cache`` by default), a file named by a hash of the source and the flags, and
loaded with :mod:`ctypes`; nothing is downloaded. Exactness is checked, not assumed: after loading, masks that cross
the generator's 624-word refills and start at odd word offsets must equal torch's own, bit for bit, and leave the
generator's state where torch's leave it; ``DropoutDrawsAhead`` checks it again on the masks of a run's first forward
(torch uses oneMKL's stream instead on some CPUs, where the check fails). Anything else — no compiler, a build that
fails, a disagreement, a dtype other than float32, ``HF_ICOT_DROPOUT_KERNEL=0`` in the environment — draws with torch,
and the reason is logged once.
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import logging
import math
import os
import shutil
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
        kernel = DropoutKernel(ctypes.CDLL(str(_built())))
    except (OSError, subprocess.SubprocessError, RuntimeError) as error:
        return None, str(error)
    disagreement = _disagreement(kernel)
    return (None, disagreement) if disagreement else (kernel, None)


def _built() -> Path:
    """The shared library, compiled into the cache unless a build of the same source and flags is there already."""
    compiler = shutil.which(os.environ.get("CC") or "cc")
    if compiler is None:
        raise RuntimeError(f"no C compiler: {os.environ.get('CC') or 'cc'} is not on PATH (set CC to one)")
    flags = ["-O3", "-shared", "-fPIC"]
    if torch.backends.cpu.get_cpu_capability() in ("AVX2", "AVX512"):
        flags.append("-mavx2")  # this CPU has it: the name below keeps an AVX2 build from a machine without
    key = hashlib.sha256(SOURCE.read_bytes() + " ".join([compiler, *flags]).encode()).hexdigest()[:16]
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "hf_icot" / "kernels"
    library = cache / f"dropout_kernel-{key}.so"
    if library.exists():
        return library
    cache.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=cache) as scratch:
        built = Path(scratch) / library.name
        result = subprocess.run(
            [compiler, *flags, "-o", str(built), str(SOURCE)], capture_output=True, text=True, timeout=120
        )
        if result.returncode != 0:
            first = (result.stderr.strip().splitlines() or ["no message"])[0]
            raise RuntimeError(f"{compiler} could not build {SOURCE.name} (exit {result.returncode}): {first}")
        os.replace(built, library)  # whole or not at all, for processes that build at the same time
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
