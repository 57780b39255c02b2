"""torch's CPU dropout masks from the C kernel (hf_icot.levers.dropout_kernel): the same masks and the same generator
state as torch's own draw, bit for bit, at every offset of the Mersenne Twister's block; torch draws instead, saying
why, without a compiler, with a build that fails, or when asked; only a build of this user's is loaded (a cached file
of another owner, writable by group or others, or not of its recorded SHA-256 is refused and built again, and so is
one in a cache folder others could write to); a kernel that disagrees with torch is found by the lever's check on the
first forward and turned off, and the run stays exact."""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import stat

import pytest
import torch

from hf_icot.levers import dropout_kernel
from hf_icot.levers.dropout_ahead import Draw, DropoutDrawsAhead, dropout_mask
from hf_icot.levers.dropout_kernel import DropoutKernel, record_of, torch_dropout_mask
from tests.hf_icot.test_dropout_ahead import icot_trainer, same_run_as_torch, same_weights

needs_compiler = pytest.mark.skipif(
    shutil.which(os.environ.get("CC") or "cc") is None, reason="no C compiler here: the kernel cannot be built"
)


@pytest.fixture()
def fresh_kernel(monkeypatch):
    """This process's kernel as if never loaded, restored afterwards."""
    monkeypatch.setattr(dropout_kernel, "_loaded", {})
    monkeypatch.setattr(dropout_kernel, "_reason", {})


@needs_compiler
def test_the_kernel_draws_torchs_masks_and_leaves_the_generator_where_torch_does(fresh_kernel) -> None:
    kernel = dropout_kernel.loaded()
    assert kernel is not None, dropout_kernel.why_not()
    ours, torch_own = torch.Generator(), torch.Generator()
    # A block holds 624 words and an element takes two: sizes around 312 and 624 elements, from every word offset
    # 0-4 (a float drawn before takes one word), so that elements straddle a refill.
    for offset in range(5):
        ours.manual_seed(offset)
        torch.rand(offset, generator=ours)
        torch_own.set_state(ours.get_state())
        for size in (0, 1, 2, 311, 312, 313, 623, 624, 625, 1249, 20_000):
            for p in (0.1, 0.5, 1 / 3, 0.01, 0.9):
                expected = torch_dropout_mask((size,), torch.float32, p, torch_own)
                got = kernel.mask((size,), p, ours)
                assert torch.equal(got, expected), (offset, size, p)
                assert torch.equal(ours.get_state(), torch_own.get_state()), (offset, size, p)
    # The shape of an attention dropout, on the default generator, through the lever's own function.
    state = torch.get_rng_state()
    expected = torch_dropout_mask((4, 4, 21, 21), torch.float32, 0.1)
    after = torch.get_rng_state()
    torch.set_rng_state(state)
    got = dropout_mask(Draw.of(torch.empty(4, 4, 21, 21), 0.1, False))
    assert torch.equal(got, expected) and torch.equal(torch.get_rng_state(), after)
    assert set(got.unique().tolist()) == {0.0, expected.max().item()}, "a drawn 0 or torch's 1 / (1 - p)"
    # A non-contiguous input: torch draws into empty_like(input), in memory order.
    hidden = torch.randn(4, 21, 8).transpose(1, 2)
    torch.manual_seed(4)
    expected = torch.nn.functional.dropout(hidden, 0.1)
    torch.manual_seed(4)
    assert torch.equal(hidden * dropout_mask(Draw.of(hidden, 0.1, False)), expected)


def test_without_a_kernel_torch_draws_and_the_reason_is_named(fresh_kernel, monkeypatch, tmp_path) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setenv("CC", str(tmp_path / "no-such-compiler"))
    assert dropout_kernel.loaded() is None
    assert dropout_kernel.why_not() == f"no C compiler: {tmp_path / 'no-such-compiler'} is not on PATH (set CC to one)"
    assert not dropout_kernel.in_use()
    torch.manual_seed(3)
    expected = torch_dropout_mask((40,), torch.float32, 0.2)
    torch.manual_seed(3)
    assert torch.equal(dropout_mask(Draw.of(torch.empty(40), 0.2, False)), expected)

    monkeypatch.setenv("CC", shutil.which("false") or "false")  # a "compiler" that fails
    assert dropout_kernel._load()[1].startswith(f"{shutil.which('false')} could not build dropout_kernel.c (exit 1)")
    assert list((tmp_path / "hf_icot" / "kernels").iterdir()) == [], "a failed build leaves nothing behind"
    monkeypatch.setenv("HF_ICOT_DROPOUT_KERNEL", "0")
    assert dropout_kernel._load() == (None, "HF_ICOT_DROPOUT_KERNEL=0 in the environment")


def this_users_build(library) -> bool:
    """Whether ``library`` is owned by this user, mode 0700, with its SHA-256 recorded beside it (mode 0600)."""
    info, record = os.stat(library), record_of(library)
    recorded = record.read_text(encoding="ascii").strip()
    return (
        info.st_uid == os.geteuid()
        and stat.S_IMODE(info.st_mode) == 0o700
        and stat.S_IMODE(os.stat(record).st_mode) == 0o600
        and recorded == hashlib.sha256(library.read_bytes()).hexdigest()
    )


@needs_compiler
def test_a_build_is_reused_from_the_cache(fresh_kernel, monkeypatch, tmp_path) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    built = dropout_kernel._built()
    assert built.parent == tmp_path / "hf_icot" / "kernels" and built.name.startswith("dropout_kernel-")
    assert stat.S_IMODE(os.stat(built.parent).st_mode) == 0o700 and this_users_build(built)

    def no_compiler(*args, **kwargs):
        raise AssertionError("compiled again")

    monkeypatch.setattr(dropout_kernel.subprocess, "run", no_compiler)
    assert dropout_kernel._built() == built


#: A user id that is not this process's.
OTHER_USER = os.geteuid() + 4242


def give_to_another_user(path, monkeypatch) -> None:
    """Make ``path`` another user's: ``chown`` as root; elsewhere, ``os.fstat``/``os.lstat`` report another owner for
    that file (by its inode: a file built again is another inode)."""
    if os.geteuid() == 0:
        os.chown(path, OTHER_USER, -1)
        return
    inode = os.lstat(path).st_ino
    for name in ("fstat", "lstat"):
        real = getattr(os, name)

        def reported(target, *args, real=real, **kwargs):
            info = real(target, *args, **kwargs)
            if info.st_ino != inode:
                return info
            fields = list(info[:10])
            fields[stat.ST_UID] = OTHER_USER
            return os.stat_result(fields)

        monkeypatch.setattr(os, name, reported)


def kernel_warnings(caplog) -> list[str]:
    return [record.message for record in caplog.records if record.levelno >= logging.WARNING]


@needs_compiler
@pytest.mark.parametrize(
    "tampering", ["another owner", "group-writable", "writable by others", "other bytes", "no record"]
)
def test_a_cached_kernel_this_user_did_not_build_is_refused_and_built_again(
    fresh_kernel, monkeypatch, tmp_path, caplog, tampering
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    library = dropout_kernel._built()
    if tampering == "another owner":
        give_to_another_user(library, monkeypatch)
        reason = f"is owned by uid {OTHER_USER}, not by this user (uid {os.geteuid()})"
    elif tampering == "group-writable":
        os.chmod(library, 0o770)
        reason = "is writable by group or others (mode 770)"
    elif tampering == "writable by others":
        os.chmod(library, 0o702)
        reason = "is writable by group or others (mode 702)"
    elif tampering == "other bytes":
        with open(library, "ab") as stream:
            stream.write(b"\0")
        reason = "does not match the SHA-256 recorded when it was built"
    else:  # e.g. a build from before builds were recorded
        record_of(library).unlink()
        reason = f"has no SHA-256 recorded beside it ({record_of(library).name})"
    with caplog.at_level(logging.WARNING, logger=dropout_kernel.__name__):
        assert dropout_kernel._built() == library
    assert kernel_warnings(caplog) == [f"refusing the cached dropout kernel: {library} {reason}; building it again"]
    assert this_users_build(library)
    assert dropout_kernel.loaded() is not None, dropout_kernel.why_not()


@needs_compiler
@pytest.mark.parametrize("folder", ["another owner", "group-writable"])
def test_a_cache_folder_others_could_write_to_is_not_loaded_from(
    fresh_kernel, monkeypatch, tmp_path, caplog, folder
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    library = dropout_kernel._built()
    cache, inode = library.parent, os.stat(library).st_ino
    if folder == "another owner":
        give_to_another_user(cache, monkeypatch)
    else:
        os.chmod(cache, 0o775)
    with caplog.at_level(logging.WARNING, logger=dropout_kernel.__name__):
        built = dropout_kernel._built()
    assert this_users_build(built) and stat.S_IMODE(os.stat(built.parent).st_mode) == 0o700
    if folder == "another owner":  # a fresh private folder for this process instead
        assert built.parent != cache and built.parent.name.startswith("hf_icot-kernels-")
        assert kernel_warnings(caplog) == [
            f"not using the kernel cache {cache} (owned by uid {OTHER_USER}, not by this user (uid {os.geteuid()})); "
            f"building in {built.parent} for this process"
        ]
    else:  # made private again, and what it held built again
        assert built == library and os.stat(library).st_ino != inode
        assert kernel_warnings(caplog) == [
            f"the kernel cache {cache} was writable by group or others (mode 775): made private (0700), and the "
            "kernel in it is built again"
        ]
    assert dropout_kernel.loaded() is not None, dropout_kernel.why_not()


class Disagreeing(DropoutKernel):
    """A kernel whose masks drop nothing: the generator advances as torch's, the numbers are not torch's."""

    def __init__(self, kernel: DropoutKernel) -> None:
        self._kernel = kernel

    def mask(self, shape, p, generator=None, stride=None):
        return torch.ones_like(self._kernel.mask(shape, p, generator, stride)) / (1 - p)


@needs_compiler
def test_a_disagreeing_kernel_is_refused_on_load_and_turned_off_by_the_first_forward(fresh_kernel) -> None:
    kernel = dropout_kernel.loaded()
    assert dropout_kernel._disagreement(kernel) is None
    wrong = Disagreeing(kernel)
    assert dropout_kernel._disagreement(wrong) == (
        "its mask of 1 elements at p=0.1 differs from torch's (torch draws another way here)"
    )
    # Past the load-time check (as if it had agreed there), the lever's check of the first forward turns it off.
    dropout_kernel._loaded["kernel"] = wrong
    ahead = DropoutDrawsAhead()
    same_run_as_torch(ahead)
    assert dropout_kernel.why_not() == "its mask of shape (4, 10, 32) differs from torch's own"
    assert not dropout_kernel.in_use() and "drawn ahead by torch on a helper thread" in ahead.summary()
    assert (ahead.forwards_ahead, ahead.put_back, ahead.off_reason) == (4, 0, None)


@needs_compiler
def test_masks_drawn_in_the_step_by_the_kernel_give_the_same_losses_weights_and_generator_state(fresh_kernel) -> None:
    ahead = DropoutDrawsAhead(helper=False)
    same_run_as_torch(ahead)
    assert (ahead.forwards_ahead, ahead.put_back, ahead.off_reason) == (4, 0, None)
    assert ahead.summary() == "4 training forwards drawn by the C kernel in the step, 0 put back"


def test_without_the_kernel_the_lever_does_not_draw_in_the_step(fresh_kernel, monkeypatch) -> None:
    monkeypatch.setenv("HF_ICOT_DROPOUT_KERNEL", "0")
    ahead = DropoutDrawsAhead(helper=False)
    same_run_as_torch(ahead)
    assert ahead.off_reason == "no C kernel to draw with in the step (HF_ICOT_DROPOUT_KERNEL=0 in the environment)"
    assert ahead.forwards_ahead == 0


@needs_compiler
def test_icot_trainer_on_one_thread_draws_in_the_step_with_the_same_weights(tmp_path, fresh_kernel) -> None:
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        # SDPA with attention dropout: eager attention while training
        in_step = icot_trainer(tmp_path / "in_step", draw_dropout_ahead=True)
        in_step.train()
        eager = icot_trainer(tmp_path / "eager", attention="eager", draw_dropout_ahead=False)
        eager.train()
    finally:
        torch.set_num_threads(threads)
    lever = in_step.dropout_ahead
    assert not lever.helper and lever.forwards_ahead > 0 and lever.off_reason is None
    assert same_weights(eager.model, in_step.model)
