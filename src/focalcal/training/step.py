"""The training step, written so that a GPU never waits for the host.

One step is forward, loss, backward, gradient clipping and the optimiser update. Nothing in it
reads a value back to the host: the epoch's loss sum, train NLL and error, and the first batch
whose loss was not finite are accumulated in device tensors (:class:`EpochTotals`) and read once
at the end of the epoch; the losses take their sync-free paths on a GPU
(``focalcal.losses._base.avoid_host_sync``); clipping scales by a device-side factor. So the
whole step can be captured in one CUDA graph and replayed per batch, which removes the hundreds
of kernel launches a small-image step otherwise issues one by one from Python.

How a step runs is the workflow config's ``compile`` (:data:`COMPILE_MODES`); it changes the
speed, not the run's numbers or identity:

* ``none`` — eager PyTorch.
* ``default`` — ``torch.compile`` of the model (forward and backward), the rest eager.
* ``cudagraphs`` — the whole step in one CUDA graph (``torch.cuda.CUDAGraph`` with static input
  buffers, as in PyTorch's whole-network capture recipe), captured once per run after a few eager
  warm-up steps on a side stream and replayed for every full batch of every epoch. What changes
  between epochs lives in device tensors that the graph reads and the epoch hooks update in
  place: each optimiser's learning rate (torch's LR schedulers ``fill_`` a tensor lr), a
  scheduled γ (FLSc) and AdaFocal's per-bin γs and bin edges; the epoch's totals are zeroed in
  place. The last, smaller batch of an epoch (the papers' loaders keep it) runs eagerly.
* ``inductor_cudagraphs`` — ``cudagraphs`` with the model compiled by ``torch.compile``
  (inductor, its default mode) inside the captured step: fused kernels in the one graph. It
  compiles during the warm-up steps, before the capture. Not ``mode="reduce-overhead"``: that
  captures inductor's own CUDA graphs (cudagraph trees), which cannot be recorded inside this
  step's graph, and whose static outputs the step's backward and optimiser would overwrite; the
  step's one graph already removes the launches. Not ``"max-autotune-no-cudagraphs"`` either:
  it benchmarks Triton templates for every convolution and matrix product shape when a run
  starts (minutes for a ResNet, repeated for the partial batch), for gains on these small
  images that no measurement here has shown.
* ``auto`` (the default) — :data:`AUTO_CUDA_MODE` on CUDA, ``none`` on the CPU.

On the CPU, and with an optimiser torch cannot capture (Adagrad), the graph modes
(:data:`CAPTURED_MODES`) run eagerly; ``run.json`` records the mode asked for, the mode that
ran and why (:meth:`CompilePlan.record`).
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from focalcal.training.config import COMPILE_MODES
from focalcal.training.progress import log

#: The modes that capture the step in a CUDA graph.
CAPTURED_MODES = ("cudagraphs", "inductor_cudagraphs")
#: The modes that run the model compiled by torch.compile.
COMPILED_MODEL_MODES = ("default", "inductor_cudagraphs")

#: What ``compile: auto`` runs on CUDA. ``inductor_cudagraphs`` replaces it only where
#: ``python -m bench gpu`` measured it faster than ``cudagraphs`` on every architecture AND every
#: study recipe captures under it (``bench.bench_gpu.auto_verdict`` reads a results file and says
#: whether it shows both). No GPU measurement of it exists yet (2026-11-28), so auto keeps
#: ``cudagraphs``; the switch is this one line, made when a results file shows both.
AUTO_CUDA_MODE = "cudagraphs"

#: Eager steps on a side stream before the capture: they create the optimiser's state and let
#: cuDNN/cuBLAS pick their algorithms and workspaces outside the graph.
WARMUP_STEPS = 3


@dataclass(frozen=True)
class CompilePlan:
    """The ``compile`` setting asked for, the mode that runs, and why it differs (if it does)."""

    requested: str
    mode: str
    reason: str = ""

    def record(self) -> dict:
        return {"requested": self.requested, "mode": self.mode, "reason": self.reason}


def plan_compile(requested: str, device: torch.device, optimizer_name: str) -> CompilePlan:
    """The mode a run of ``optimizer_name`` on ``device`` uses for ``compile: requested``."""
    if requested not in COMPILE_MODES:
        raise ValueError(f"compile = {requested!r} is not one of {list(COMPILE_MODES)}")
    cuda = device.type == "cuda"
    if requested == "auto":
        if not cuda:
            return CompilePlan(requested, "none", "auto: eager on the CPU (no kernel-launch cost to remove)")
        requested_mode, why = AUTO_CUDA_MODE, f"auto: {AUTO_CUDA_MODE}, the whole step in a CUDA graph on CUDA"
    else:
        requested_mode, why = requested, ""
    if requested_mode in CAPTURED_MODES:
        if not cuda:
            return CompilePlan(requested, "none", f"CUDA graphs need a CUDA device; the step ran eagerly on {device.type}")
        if optimizer_name == "adagrad":
            return CompilePlan(requested, "none", "torch's Adagrad keeps its step count on the host and cannot be "
                                                  "captured in a CUDA graph; the step ran eagerly")
    return CompilePlan(requested, requested_mode, why)


def optimizer_options(optimizer_name: str, device: torch.device, mode: str) -> dict:
    """Implementation switches for the optimiser: fused kernels on CUDA, and under CUDA graphs
    implementations that read a tensor learning rate on the device (:func:`lr_on_device`):
    Adam's capturable one (step counts on the device too) and fused SGD (foreach SGD turns a
    tensor lr into a host number). On the CPU torch's defaults, so CPU runs keep their numbers."""
    if device.type != "cuda":
        return {}
    if mode in CAPTURED_MODES:
        return {"capturable": True, "foreach": True} if optimizer_name == "adam" else {"fused": True}
    return {"fused": True} if optimizer_name in ("sgd", "adam") else {}


def lr_on_device(optimizers, device: torch.device) -> list[torch.Tensor]:
    """Each param group's learning rate as a 0-dim float32 tensor on ``device`` (float32: what
    torch's fused and capturable kernels read), returned in group order. A captured step reads
    it there, and torch's LR schedulers update a tensor lr in place (``fill_``), so the graph
    sees every epoch's rate."""
    rates = []
    for optimizer in optimizers:
        for group in optimizer.param_groups:
            group["lr"] = torch.tensor(float(group["lr"]), dtype=torch.float32, device=device)
            rates.append(group["lr"])
    return rates


def current_lr(optimizer) -> float:
    """The first param group's learning rate as a number, whether a float or a device tensor."""
    return float(optimizer.param_groups[0]["lr"])


def descended(loss: torch.Tensor, targets: torch.Tensor, reduction: str, ignore_index: int | None) -> torch.Tensor:
    """What the step descends: the batch's mean loss, or with ``recipe.loss_reduction: sum`` that
    mean times the batch's labelled samples (pixels), which is the summed loss — for MMCE
    N·(CE + λ·MMCE), as in mukhoti2020's released code — and 0 for an all-ignored batch; with
    ``mean_of_sums`` the summed loss divided by the batch's samples (for trees: each tree's summed
    node losses, averaged over the batch's trees). The loss module stays mean-reduced, so validation loss, logged train_loss and loss state are the same
    under every reduction."""
    if reduction == "mean":
        return loss
    labelled = targets.numel() if ignore_index is None else (targets != ignore_index).sum()  # no host sync
    return loss * labelled if reduction == "sum" else loss * labelled / targets.shape[0]


class EpochTotals:
    """What an epoch's steps add up, kept on the device (static tensors: a CUDA graph updates
    them in place on every replay). ``batch`` counts the steps taken; ``first_bad`` is the
    0-based batch whose loss first was NaN/Inf (−1: none), ``bad_loss`` that loss and
    ``bad_logits`` whether that batch's logits were already non-finite."""

    def __init__(self, device: torch.device) -> None:
        def zero(dtype):
            return torch.zeros((), dtype=dtype, device=device)

        self.loss_sum, self.nll_sum = zero(torch.float64), zero(torch.float64)
        self.correct, self.batch = zero(torch.int64), zero(torch.int64)
        self.first_bad, self.bad_logits = torch.full((), -1, dtype=torch.int64, device=device), zero(torch.bool)
        self.bad_loss = zero(torch.float32)

    def reset(self) -> None:
        """Zero the totals in place: a captured graph keeps writing into these very tensors."""
        for total in (self.loss_sum, self.nll_sum, self.correct, self.batch, self.bad_logits, self.bad_loss):
            total.zero_()
        self.first_bad.fill_(-1)

    def add(self, loss: torch.Tensor, logits: torch.Tensor, targets: torch.Tensor, ignore_index: int) -> None:
        loss, logits = loss.detach(), logits.detach()
        newly_bad = (self.first_bad < 0) & ~torch.isfinite(loss)
        self.bad_logits.copy_(torch.where(newly_bad, ~torch.isfinite(logits).all(), self.bad_logits))
        self.first_bad.copy_(torch.where(newly_bad, self.batch, self.first_bad))
        self.bad_loss.copy_(torch.where(newly_bad, loss.float(), self.bad_loss))
        self.loss_sum.add_(loss.double() * self.rows(targets, ignore_index))
        self.nll_sum.add_(F.cross_entropy(logits.double(), targets, reduction="sum", ignore_index=ignore_index))
        self.correct.add_((logits.argmax(1) == targets).sum())
        self.batch.add_(1)

    @staticmethod
    def rows(targets: torch.Tensor, ignore_index: int):
        """What a batch's mean loss is weighed by in ``loss_sum``: its samples (rows of targets)."""
        return targets.shape[0]

    def read(self) -> dict:
        """The totals as Python numbers: the epoch's one read-back."""
        values = torch.stack([self.loss_sum, self.nll_sum, self.correct.double(), self.first_bad.double(),
                              self.bad_logits.double(), self.bad_loss.double()]).tolist()
        loss_sum, nll_sum, correct, first_bad, bad_logits, bad_loss = values
        return {"loss_sum": loss_sum, "nll_sum": nll_sum, "correct": int(correct), "first_bad": int(first_bad),
                "bad_logits": bool(bad_logits), "bad_loss": bad_loss}


class TrainStep:
    """``step(inputs, targets)`` trains on one batch in the planned mode; ``begin_epoch()`` before
    an epoch's first batch, ``end_epoch()`` after its last returns its :class:`EpochTotals`.

    ``forward`` is the model (or its compiled wrapper); ``objective(loss, targets)`` what the
    step descends; ``autocast_dtype`` the forward's autocast type (bf16 on CUDA; None: full
    precision)."""

    def __init__(self, model, forward, loss_fn, optimizer, objective, autocast_dtype: torch.dtype | None, *,
                 grad_clip_norm: float | None, ignore_index: int, plan: CompilePlan, device: torch.device,
                 embedding_optimizer: torch.optim.Optimizer | None = None) -> None:
        self.model, self.forward, self.loss_fn, self.optimizer = model, forward, loss_fn, optimizer
        # the word vectors' own optimiser (recipe.embedding_lr), stepped after the main one
        self.optimizers = [optimizer] + ([embedding_optimizer] if embedding_optimizer is not None else [])
        self.objective, self.autocast_dtype = objective, autocast_dtype
        self.grad_clip_norm, self.ignore_index = grad_clip_norm, ignore_index
        self.plan, self.device = plan, device
        self.parameters = list(model.parameters())
        if device.type == "cuda":
            torch.backends.cudnn.benchmark = True  # static shapes: the tuned algorithms are reused every step
        self.totals = EpochTotals(device)
        # the rates a captured step reads, on the device (lr_on_device); floats in eager modes
        captured = plan.mode in CAPTURED_MODES
        self._lrs = lr_on_device([o for o in self.optimizers if o is not None], device) if captured else []
        self._graph = None
        self._static: tuple[torch.Tensor, torch.Tensor] | None = None
        self._warm = 0

    def begin_epoch(self) -> None:
        """Zero the epoch's totals in place; the graph, once captured, serves every epoch."""
        self.totals.reset()
        self._keep_lr_tensors()

    def _keep_lr_tensors(self) -> None:
        """Put back the lr tensors the graph reads where something re-bound a group's lr (loading
        an optimiser state does), keeping the value; in the eager modes a rate is a number (a
        checkpoint of a graph-mode run holds tensors)."""
        groups = [group for optimizer in self.optimizers if optimizer is not None for group in optimizer.param_groups]
        if not self._lrs:
            for group in groups:
                if torch.is_tensor(group["lr"]):
                    group["lr"] = float(group["lr"])
            return
        for group, rate in zip(groups, self._lrs, strict=True):
            if group["lr"] is not rate:
                rate.fill_(float(group["lr"]))
                group["lr"] = rate

    def end_epoch(self) -> EpochTotals:
        return self.totals

    def step(self, inputs: torch.Tensor, targets: torch.Tensor) -> None:
        if self.plan.mode not in CAPTURED_MODES:
            self._train(inputs, targets)
        elif self._graph is not None and inputs.shape == self._static[0].shape:
            self._static[0].copy_(inputs)
            self._static[1].copy_(targets)
            self._graph.replay()
        elif self._static is not None and inputs.shape != self._static[0].shape:
            self._train(inputs, targets)  # the epoch's last, smaller batch
        elif self._warm < WARMUP_STEPS:
            self._warm_up(inputs, targets)
        else:
            self._capture(inputs, targets)

    def autocast(self):
        if self.autocast_dtype is None:
            return contextlib.nullcontext()
        # A graph replays the casts it recorded; autocast's cache of cast weights would outlive
        # the capture, so it is off under CUDA graphs (as torch's CUDA-graph notes ask).
        return torch.autocast(self.device.type, dtype=self.autocast_dtype, cache_enabled=self.plan.mode not in CAPTURED_MODES)

    def _train(self, inputs: torch.Tensor, targets: torch.Tensor) -> None:
        """The step itself: everything here stays on the device."""
        with self.autocast():
            logits = self.forward(inputs)
        logits = logits.float()
        loss = self.loss_fn(logits, targets)
        for optimizer in self.optimizers:
            optimizer.zero_grad(set_to_none=True)
        self.objective(loss, targets).backward()
        if self.grad_clip_norm is not None:
            # bf16 autocast runs without a GradScaler, so the gradients are unscaled here; the
            # clip multiplies by a device-side factor (no read-back)
            torch.nn.utils.clip_grad_norm_(self.parameters, self.grad_clip_norm)
        for optimizer in self.optimizers:
            optimizer.step()
        self.totals.add(loss, logits, targets, self.ignore_index)

    def _warm_up(self, inputs: torch.Tensor, targets: torch.Tensor) -> None:
        with self._side_stream():
            self._train(inputs, targets)
        self._warm += 1

    def _capture(self, inputs: torch.Tensor, targets: torch.Tensor) -> None:
        """Record this batch's step (once per run), with static copies of its tensors as the graph's inputs,
        then replay it (recording does not run it). A step that cannot be recorded falls back to
        eager for the rest of the run (:meth:`_fall_back`) and this batch runs eagerly."""
        self._static = (inputs.clone(), targets.clone())
        for optimizer in self.optimizers:  # the graph's backward allocates the gradients it reuses
            optimizer.zero_grad(set_to_none=True)
        try:
            self._graph = self._record(lambda: self._train(*self._static))
        except Exception as error:  # noqa: BLE001  any capture error: a real fault re-raises in the eager step
            self._fall_back(error)
            self._train(inputs, targets)
            return
        self._graph.replay()

    def _fall_back(self, error: Exception) -> None:
        """Recording ran no kernel, so nothing of the batch was applied: eager from here on, the
        reason printed once and kept in :attr:`plan` (``run.json``'s ``compile``)."""
        first_line = (str(error).strip().splitlines() or [""])[0][:300]
        compiled = self.plan.mode in COMPILED_MODEL_MODES  # the model stays compiled, the step eager
        reason = (f"capture failed ({type(error).__name__}: {first_line}); the step ran "
                  f"{'with the compiled model, uncaptured,' if compiled else 'eagerly'} from then on")
        self.plan = CompilePlan(self.plan.requested, "default" if compiled else "none", reason)
        self._graph, self._static = None, None
        log(f"CUDA graph {reason}")

    def _side_stream(self):
        """Where the warm-up steps run: a side stream, as CUDA graph capture asks."""
        return _SideStream(self.device)

    def _record(self, step) -> torch.cuda.CUDAGraph:
        torch.cuda.synchronize(self.device)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            step()
        return graph


class _SideStream:
    def __init__(self, device: torch.device) -> None:
        self.device, self.stream, self.context = device, torch.cuda.Stream(device), None

    def __enter__(self):
        self.stream.wait_stream(torch.cuda.current_stream(self.device))
        self.context = torch.cuda.stream(self.stream)
        self.context.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        self.context.__exit__(*exc)
        torch.cuda.current_stream(self.device).wait_stream(self.stream)
