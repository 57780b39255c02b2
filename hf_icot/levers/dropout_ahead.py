"""A CPU training forward's dropout masks drawn faster, as the same numbers: by a C kernel in the step, or on a
helper thread while the forward runs where the environment lets torch's threads sleep.

On the CPU torch draws every dropout mask with its Mersenne Twister one element after another on one thread (~7.5 ns
an element, ``bench/bench_dropout_draws.py``): at the stepwise reference's small vocabulary about a fifth of a GPT-2
training step. The masks a forward asks for are known before it runs — the same shapes, probabilities and order for
every batch of the same shape — so a helper thread can draw them from torch's default generator, in that order, while
the forward computes, and each ``torch.nn.functional.dropout`` call of the forward multiplies by the next one. They are
the numbers torch would have drawn, multiplied as torch multiplies them, and the generator ends where it would have
ended: the loss and the gradients are bitwise the same, and so is everything drawn after the step.

How it stays exact:

* the first training forward of each batch shape runs as torch runs it and records its dropout calls; the run's first
  such forward is also checked, on a copy of the generator, to have drawn nothing else (attention written as SDPA
  draws its dropout inside the kernel, a model may draw numbers of its own or call ``dropout1d``/``alpha_dropout``):
  if it did, the lever is off for the rest of the run;
* a later forward whose calls leave the record (another shape or probability, one call more or fewer) is put back:
  the helper stops, the generator is rewound to the forward's start, the masks already used are drawn again, and the
  rest runs as torch runs it. A run whose forwards keep leaving their records (8 put back, and more than one for
  every 10 drawn ahead) turns the lever off.

The masks come from :mod:`~hf_icot.levers.dropout_kernel` where it is in use (torch's numbers from a small C
kernel, ~8x faster than torch's own draw here; checked against torch's masks on the run's first forward), else from
torch. A helper pays only where the step leaves a core idle while it draws: libgomp's threads busy-wait between
parallel regions by default and a helper then competes with them (0.95-0.98x on the bench's step at 2 threads, with
torch's draws); with ``OMP_WAIT_POLICY=PASSIVE``, which libgomp reads when torch is imported, it was 1.09-1.13x with
torch's draws and 1.23x with the kernel's. Without that (one torch thread, or spinning threads),
``DropoutDrawsAhead(helper=False)`` lets the forward draw its own masks with the kernel (and turns itself off where
there is no kernel: torch's own draw is the same). In a whole recipe run the policy costs more than a helper saves
(torch's threads sleeping between the step's many small parallel regions: the side of ``bench/stepwise_vs_reference``
with ``PASSIVE`` and the helper was 0.96x the side without the lever, whose threads spin), so nothing here sets it:
the helper is used only where the environment itself sets ``PASSIVE``; by default the forward draws with the kernel.

Nothing outside the training forward sees the lever: ``torch.nn.functional.dropout`` is never replaced. While a
forward runs, a :class:`DropoutRoute` (a ``TorchFunctionMode``, which torch keeps per thread) sends that thread's
dropout calls to the lever; another thread's calls, and the same thread's before and after the forward, are torch's
own. The price is one Python method call for each torch function the forward calls (the mode sees them all and passes
every other one on unchanged).

It is off unless asked for (``draw_dropout_ahead``), and does nothing on a GPU.

``ICoTTrainer`` holds the lever (:func:`dropout_draws_ahead_for`), wraps each training forward in
:func:`forward_drawing_ahead` and its ``train()`` in :meth:`DropoutDrawsAhead.while_training`, which gives the model
(and one that ``model_init`` builds there, :meth:`DropoutDrawsAhead.model_built`) eager attention.
"""

from __future__ import annotations

import contextlib
import logging
import os
import queue
import threading
from collections.abc import Callable, Iterator, Mapping
from typing import Any, NamedTuple

import torch
from torch.nn import functional
from torch.overrides import TorchFunctionMode

from hf_icot.levers import dropout_kernel
from hf_icot.levers.dropout_kernel import torch_dropout_mask

logger = logging.getLogger(__name__)

#: torch's own dropout, the one function a :class:`DropoutRoute` routes (compared by identity).
TORCH_DROPOUT = functional.dropout


class DropoutRoute(TorchFunctionMode):
    """``with DropoutRoute(route):`` — this thread's calls of ``torch.nn.functional.dropout`` go to
    ``route(input, p=..., training=..., inplace=...)`` until the block ends; every other torch function runs as torch
    runs it, and so does every other thread's dropout (torch keeps function modes per thread). Inside ``route`` the
    mode is off, so ``route`` may call :data:`TORCH_DROPOUT` and any torch function as usual."""

    def __init__(self, route: Callable[..., torch.Tensor]) -> None:
        super().__init__()
        self.route = route

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if func is TORCH_DROPOUT:
            return self.route(*args, **(kwargs or {}))
        return func(*args, **(kwargs or {}))


class Draw(NamedTuple):
    """One dropout call of a forward, as far as its random numbers go."""

    shape: tuple[int, ...]
    p: float
    dtype: torch.dtype
    inplace: bool
    #: The mask's strides where they are not contiguous: torch draws into ``empty_like(input)``, in memory order.
    stride: tuple[int, ...] | None = None

    @classmethod
    def of(cls, input: torch.Tensor, p: float, inplace: bool) -> Draw:  # noqa: A002 - torch's own name
        """The draw of ``torch.nn.functional.dropout(input, p, inplace=inplace)``."""
        stride = None
        if not input.is_contiguous():
            like = torch.empty_like(input, device="meta")  # its layout, without memory
            stride = None if like.is_contiguous() else tuple(like.stride())
        return cls(tuple(input.shape), float(p), input.dtype, bool(inplace), stride)


def _draws(input: torch.Tensor, p: float, training: bool) -> bool:  # noqa: A002 - torch's own name
    """Whether torch's CPU dropout draws a mask for this call (it draws none for p 0 or 1, eval, or no elements)."""
    return training and 0 < p < 1 and input.numel() > 0


def dropout_mask(draw: Draw, generator: torch.Generator | None = None) -> torch.Tensor:
    """The scaled mask torch's CPU dropout draws for ``draw`` (``empty_like(input).bernoulli_(1 - p).div_(1 - p)``),
    drawn by :mod:`~hf_icot.levers.dropout_kernel` where it is in use (the same numbers), else by torch."""
    kernel = dropout_kernel.loaded() if draw.dtype == torch.float32 else None
    if kernel is None:
        return torch_dropout_mask(draw.shape, draw.dtype, draw.p, generator, draw.stride)
    return kernel.mask(draw.shape, draw.p, generator, draw.stride)


#: Config fields in which transformers' models name their attention dropout.
ATTENTION_DROPOUT_FIELDS = ("attn_pdrop", "attention_dropout", "attention_probs_dropout_prob")


@contextlib.contextmanager
def eager_attention_while(model: Any) -> Iterator[None]:
    """Run a transformers model whose SDPA attention has a dropout as eager attention inside the block, and as SDPA
    again after it; anything else is left as it is.

    SDPA draws its attention dropout inside the kernel, where no ``torch.nn.functional.dropout`` sees it; eager
    attention is the same function (softmax, dropout, product: the loss to float rounding) with the draw in Python,
    and on the CPU SDPA runs its math path under dropout anyway. The saved config never names the implementation."""
    config = getattr(model, "config", None)
    dropout = max((float(getattr(config, name, 0) or 0) for name in ATTENTION_DROPOUT_FIELDS), default=0.0)
    if (
        getattr(config, "_attn_implementation", None) != "sdpa"
        or dropout <= 0
        or not hasattr(model, "set_attn_implementation")
    ):
        yield
        return
    model.set_attn_implementation("eager")
    try:
        yield
    finally:
        model.set_attn_implementation("sdpa")


def dropout_draws_ahead_for(args: Any, model: Any, latent: bool) -> DropoutDrawsAhead | None:
    """The lever for a run with training arguments ``args`` if it asked for it (``draw_dropout_ahead``, off by default)
    and it can be exact there: on the CPU, without gradient checkpointing (whose backward runs the forward again) and
    not for a latent method (several forwards per step); else ``None``. A run that asked for it logs one line saying
    how its masks are drawn, or why the lever does nothing here.

    A helper thread draws on 2 or more torch threads with ``OMP_WAIT_POLICY=PASSIVE``; elsewhere (one thread, or
    torch's threads spinning on the idle core, where a helper is slower: bench/bench_dropout_draws.py) the forward
    draws its own masks with the C kernel, if it is in use."""
    if not getattr(args, "draw_dropout_ahead", False):
        return None
    idle = None
    if args.device.type != "cpu":
        idle = f"this run trains on {args.device.type}, where the lever does nothing (it is for CPU training)"
    elif latent or args.gradient_checkpointing:
        idle = "a latent method or gradient checkpointing runs a forward more than once per step"
    elif not isinstance(model, torch.nn.Module):
        idle = "the model is not a torch module"
    if idle is not None:
        logger.info("draw_dropout_ahead is on but idle: %s", idle)
        return None
    helper = torch.get_num_threads() >= 2 and passive_wait_policy()
    kernel = dropout_kernel.loaded()  # built now rather than in the first step, so that the line below can say
    no_kernel = None if kernel is not None else f"no C kernel: {dropout_kernel.why_not()}"
    if helper:
        drawer = "the C kernel" if no_kernel is None else f"torch ({no_kernel})"
        logger.info("draw_dropout_ahead is on: dropout masks drawn ahead on a helper thread by %s", drawer)
    elif no_kernel is None:
        logger.info(
            "draw_dropout_ahead is on: dropout masks drawn in the step by the C kernel (no helper thread: %s)",
            _why_no_helper(),
        )
    else:  # torch's own draw in the step is what the run does without the lever
        logger.info("draw_dropout_ahead is on but idle: no helper thread (%s) and %s", _why_no_helper(), no_kernel)
        return None
    return DropoutDrawsAhead(helper=helper)


def _why_no_helper() -> str:
    """Why :func:`dropout_draws_ahead_for` gives its lever no helper thread, in a few words."""
    if torch.get_num_threads() < 2:
        return "one torch thread"
    return f"OMP_WAIT_POLICY is {os.environ.get('OMP_WAIT_POLICY', 'unset')}, not PASSIVE"


def passive_wait_policy() -> bool:
    """Whether the environment asks libgomp's threads to sleep, rather than spin, between parallel regions."""
    return os.environ.get("OMP_WAIT_POLICY", "").strip().upper() == "PASSIVE"


class DropoutDrawsAhead:
    """Draws the dropout masks of CPU training forwards ahead on a helper thread; see the module's docstring.

    ``with ahead.forward(inputs): loss = model(**inputs).loss`` — ``inputs`` (a mapping of tensors) names the batch
    shape. Counters: ``forwards_ahead`` (forwards whose masks the helper drew), ``put_back`` (forwards that left their
    record), ``off_reason`` (why the lever turned itself off, or ``None``)."""

    #: Put-backs from which the lever gives up, when they are also more than a tenth of the forwards drawn ahead.
    MAX_PUT_BACK = 8

    def __init__(self, helper: bool = True) -> None:
        self.helper = helper  # else the forward draws its masks itself, with the C kernel (off without it)
        self._attention_switches: contextlib.ExitStack | None = None  # while :meth:`while_training` holds
        self._start_afresh()

    def _start_afresh(self) -> None:
        """No record, no forward checked, no count: the lever as made."""
        self._records: dict[tuple, tuple[Draw, ...]] = {}
        self._checked = False  # whether a forward was shown to draw through torch.nn.functional.dropout only
        self.forwards_ahead = 0
        self.put_back = 0
        self.off_reason: str | None = None

    @contextlib.contextmanager
    def while_training(self, model: Any) -> Iterator[None]:
        """Wrap a ``Trainer.train()``: ``model`` (and one :meth:`model_built` is given inside the block) trains with
        eager attention, restored after; then one log line says what the lever did (none for a model without
        dropout)."""
        with contextlib.ExitStack() as switches:
            switches.enter_context(eager_attention_while(model))
            self._attention_switches = switches
            try:
                yield
            finally:
                self._attention_switches = None
        if self.forwards_ahead or self.put_back or self.off_reason:  # silent for a model without dropout
            logger.info("dropout masks: %s", self.summary())

    def model_built(self, model: Any) -> None:
        """``model`` was built inside :meth:`while_training` (``Trainer.train()`` calls ``model_init``): it trains
        with eager attention too, and the lever starts afresh, its first forward checked again (it may be another
        model). Outside the block nothing changes."""
        if self._attention_switches is None:
            return
        self._start_afresh()
        self._attention_switches.enter_context(eager_attention_while(model))

    @contextlib.contextmanager
    def forward(self, inputs: Mapping[str, Any]) -> Iterator[None]:
        if self.off_reason is not None:
            yield
            return
        key = tuple((name, tuple(value.shape)) for name, value in inputs.items() if isinstance(value, torch.Tensor))
        record = self._records.get(key)
        if record == ():  # a forward that draws nothing: no helper to start
            yield
            return
        with self._recording(key) if record is None else self._drawing_ahead(key, record):
            yield

    def summary(self) -> str:
        """One line for the log: how many forwards had their masks drawn ahead, put back, and why it stopped."""
        drawer = "the C kernel" if dropout_kernel.in_use() else "torch"
        where = "ahead by {} on a helper thread" if self.helper else "by {} in the step"
        line = f"{self.forwards_ahead} training forwards drawn {where.format(drawer)}, {self.put_back} put back"
        return line if self.off_reason is None else f"{line}; then drawn in the step: {self.off_reason}"

    def _turn_off(self, reason: str) -> None:
        self.off_reason = reason
        logger.info("dropout masks are drawn in the step from now on: %s", reason)

    @contextlib.contextmanager
    def _recording(self, key: tuple) -> Iterator[None]:
        torch_dropout = TORCH_DROPOUT
        start = torch.get_rng_state()
        calls: list[Draw] = []
        other_device = []

        def recording(input, p=0.5, training=True, inplace=False):  # noqa: A002 - torch's own names
            if _draws(input, p, training):
                calls.append(Draw.of(input, p, inplace))
                other_device.append(input.device.type != "cpu")
            return torch_dropout(input, p, training, inplace)

        with DropoutRoute(recording):
            yield
        if any(other_device):
            self._turn_off("a dropout input is not on the CPU (its generator is another)")
            return
        if not self._checked:
            self._check_nothing_else_drew(start, calls)
        if self.off_reason is None and not self.helper and calls and dropout_kernel.loaded() is None:
            self._turn_off(f"no C kernel to draw with in the step ({dropout_kernel.why_not()})")
        if self.off_reason is None:
            self._records[key] = tuple(calls)

    def _check_nothing_else_drew(self, start: torch.Tensor, calls: list[Draw]) -> None:
        """Turn the lever off unless ``calls``, drawn from ``start``, leave the generator where the forward left it;
        and the kernel off unless its masks of ``calls`` are torch's own."""
        replay, kernel_replay = torch.Generator(), torch.Generator()
        replay.set_state(start)
        kernel_replay.set_state(start)
        for call in calls:
            mask = torch_dropout_mask(call.shape, call.dtype, call.p, replay, call.stride)
            if dropout_kernel.loaded() is not None and not torch.equal(dropout_mask(call, kernel_replay), mask):
                dropout_kernel.turn_off(f"its mask of shape {tuple(call.shape)} differs from torch's own")
        kernel_used = bool(calls) and dropout_kernel.loaded() is not None
        if kernel_used and not torch.equal(kernel_replay.get_state(), replay.get_state()):
            dropout_kernel.turn_off("it leaves the generator elsewhere than torch's own draws of a forward do")
        if not torch.equal(replay.get_state(), torch.get_rng_state()):
            self._turn_off(
                "the forward draws random numbers outside torch.nn.functional.dropout (SDPA's own dropout, or a "
                "model's own draws): a helper's draws would interleave with them"
            )
        self._checked = True

    @contextlib.contextmanager
    def _drawing_ahead(self, key: tuple, record: tuple[Draw, ...]) -> Iterator[None]:
        torch_dropout = TORCH_DROPOUT
        start = torch.get_rng_state()
        masks: queue.SimpleQueue = queue.SimpleQueue()
        stop = threading.Event()
        served = 0
        left_record = False

        def draw() -> None:
            try:
                for call in record:
                    if stop.is_set():
                        return
                    masks.put(dropout_mask(call))
            except BaseException as error:  # noqa: BLE001 - handed to the forward, which raises it
                masks.put(error)

        helper = threading.Thread(target=draw, name="dropout-draws-ahead", daemon=True) if self.helper else None

        def rewind() -> None:
            """Stop the helper and leave the generator as torch's own dropout calls so far would have."""
            stop.set()
            if helper is not None:
                helper.join()
            torch.set_rng_state(start)
            for call in record[:served]:
                dropout_mask(call)

        def ahead(input, p=0.5, training=True, inplace=False):  # noqa: A002 - torch's own names
            nonlocal served, left_record
            if left_record or not _draws(input, p, training):
                return torch_dropout(input, p, training, inplace)
            call = Draw.of(input, p, inplace)
            if served == len(record) or record[served] != call or input.device.type != "cpu":
                rewind()
                left_record = True
                return torch_dropout(input, p, training, inplace)
            mask = masks.get() if helper is not None else dropout_mask(call)
            if isinstance(mask, BaseException):
                raise mask
            served += 1
            return input.mul_(mask) if inplace else input * mask  # as torch's CPU dropout multiplies

        if helper is not None:
            helper.start()
        try:
            with DropoutRoute(ahead):
                yield
        finally:
            if not left_record:
                stop.set()
                if helper is not None:
                    helper.join()
                if served != len(record):  # fewer calls than recorded, or the forward raised
                    rewind()
                    left_record = True
            if left_record:
                self.put_back += 1
                del self._records[key]  # recorded again the next time this shape comes
                if self.put_back >= self.MAX_PUT_BACK and self.put_back * 10 > self.forwards_ahead:
                    self._turn_off(f"{self.put_back} forwards left their records")
            else:
                self.forwards_ahead += 1


def forward_drawing_ahead(
    lever: DropoutDrawsAhead | None, model: Any, inputs: Mapping[str, Any]
) -> contextlib.AbstractContextManager[None]:
    """The block around a forward of ``model`` on ``inputs``: ``lever.forward(inputs)`` where there is a lever and the
    model trains (an evaluation forward draws no dropout), else a block that changes nothing."""
    if lever is None or not model.training:
        return contextlib.nullcontext()
    return lever.forward(inputs)
