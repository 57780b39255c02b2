"""Keep the CPU memory a training step frees, so the next step reuses it instead of faulting fresh pages in.

On Linux, PyTorch's CPU tensors come from glibc's ``malloc``. A block above malloc's mmap threshold (128 KiB at first,
raised by glibc as such blocks are freed, never above 32 MiB) gets pages of its own and gives them back to the kernel
when it is freed, and free memory at the top of the heap is trimmed once it exceeds twice that threshold. A training
step allocates and frees the same activations, logits and gradients at every step, so every step faults the same
pages in again, each one zeroed by the kernel: on the stepwise reference's 4x4 setting (4 layers, 128 wide, batch 32,
this 2-core virtual machine) ~14,000 minor page faults per step with a 400-token vocabulary and ~290,000 (1.1 GiB)
with GPT-2's 50,257-token output layer, where they cost about a third of the step.

:func:`keep_freed_memory` tells glibc (``mallopt``) to put every block up to 32 MiB (the most it allows) in its heap
(``M_MMAP_THRESHOLD``) and not to trim the heap below 1 GiB of free memory (``M_TRIM_THRESHOLD``), so a freed block
is there for the next allocation of its size. Blocks above 32 MiB still get pages of their own and give them back, so
what the process keeps is bounded by its steps' working set; with a large vocabulary the loss keeps its blocks under
that size (:mod:`hf_icot.modeling.chunked_loss`). No number changes: where a tensor lies changes no arithmetic
(``tests/hf_icot/test_freed_memory.py``: the same losses, bit for bit, and the page faults gone). What it costs: the
process keeps up to 1 GiB of what it has freed (resident memory near its peak; the peak itself does not grow). The
setting is the process's, not the trainer's: it stays after training (glibc cannot read the previous values back).
Elsewhere than glibc it does nothing.
"""

from __future__ import annotations

import ctypes
import logging
import platform

logger = logging.getLogger(__name__)

#: glibc's ``mallopt`` parameters (``malloc.h``).
M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
#: The largest block glibc will take from its heap (its ceiling on 64-bit systems).
MMAP_THRESHOLD_BYTES = 32 << 20
#: Free memory the heap may keep at its top before glibc gives it back.
TRIM_THRESHOLD_BYTES = 1 << 30

_kept = False


def keep_freed_memory() -> bool:
    """Set glibc's malloc to keep freed memory in the process (see the module); True once it is set, False where the
    C library is not glibc or refuses. Setting it twice is harmless."""
    global _kept
    if _kept:
        return True
    if platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
        return False
    try:
        libc = ctypes.CDLL(None)  # the process's own C library
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes, mallopt.restype = (ctypes.c_int, ctypes.c_int), ctypes.c_int
    _kept = (
        mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES) == 1 and mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD_BYTES) == 1
    )
    if _kept:
        logger.info("reuse_freed_memory: glibc malloc keeps freed blocks up to 32 MiB for the next step")
    return _kept
