"""Whether a run's training step can be captured in one CUDA graph, checked on the CPU.

A CUDA graph replays the kernels it recorded and nothing else, so the step must not read a
value back to the host (``.item()``, ``int(t)``, ``bool(t)``, ``.tolist()``, a boolean mask, any
op whose output shape depends on the data) and must not meet a tensor that lives on another
device (a CPU tensor copied to the GPU inside the step is a blocking copy that capture refuses).

:func:`check_step` runs the real step of a run (:class:`focalcal.training.step.TrainStep`: the
run's model, loss with its state, objective, clipping and optimiser in the implementation the
graph mode uses) with every module on the ``meta`` device, which stands in for the GPU: meta
tensors have shapes but no values, so a host read cannot succeed, and a :class:`StepGuard`
names any op that reads the host or gets a tensor from outside the device. The losses take their
sync-free paths (``focalcal.losses.sync_free``), as they do on a GPU.

:func:`planned_runs` lists what the shipped configs train, from the project's own plan.
"""

from __future__ import annotations

import contextlib
import copy
import json
from types import SimpleNamespace
from unittest import mock

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

from focalcal import catalog
from focalcal import models as model_lib
from focalcal.data.segmentation import IGNORE_INDEX as SEGMENTATION_IGNORE_INDEX
from focalcal.data.text import TOKEN_IGNORE_INDEX
from focalcal.losses._base import sync_free
from focalcal.training.config import RunConfig
from focalcal.training.step import CompilePlan, TrainStep, descended, optimizer_options, plan_compile

#: The device the step is checked on: it has shapes and no values, like a GPU seen from the host.
STANDIN_DEVICE = torch.device("meta")

_aten = torch.ops.aten
#: Ops that read a tensor's value on the host or give an output whose shape depends on the data.
HOST_READS = {
    _aten._local_scalar_dense, _aten.nonzero, _aten.nonzero_static, _aten.masked_select, _aten._unique2,
    _aten.unique_dim, _aten.unique_consecutive, _aten.repeat_interleave, _aten.equal, _aten.is_nonzero,
}
_INDEXING = {_aten.index, _aten.index_put, _aten.index_put_, _aten._index_put_impl_}

#: Models whose step cannot be captured, and why; their runs train eagerly.
EAGER_MODELS = {
    "tree_lstm": "the Tree-LSTM walks each batch's trees on the host (.tolist(), truth tests on node "
                 "masks, boolean indexing), so its step runs eagerly",
}


class GraphUnsafe(RuntimeError):
    """The step reads the host or meets a tensor from another device; the message names the op."""


class StepGuard(TorchDispatchMode):
    """Fails on any op inside the step that reads a value to the host or takes a tensor that is
    not on ``device``."""

    def __init__(self, device: torch.device = STANDIN_DEVICE) -> None:
        super().__init__()
        self.device = device

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        packet = func.overloadpacket
        if packet in HOST_READS:
            raise GraphUnsafe(f"host read inside the step: {func} (a value or a data-dependent shape is read "
                              "back from the device)")
        if packet in _INDEXING and any(isinstance(t, torch.Tensor) and t.dtype == torch.bool
                                       for t in tree_leaves(args[1:2])):
            raise GraphUnsafe(f"boolean-mask indexing inside the step: {func} (its output shape is read back)")
        for leaf in tree_leaves((args, kwargs)):
            if isinstance(leaf, torch.Tensor) and leaf.device != self.device:
                raise GraphUnsafe(f"cross-device tensor inside the step: {func} gets a {leaf.device} tensor "
                                  f"{leaf.dtype} {tuple(leaf.shape)} on the {self.device} step")
        return func(*args, **kwargs)


@contextlib.contextmanager
def _capturable_on_standin():
    """Let torch's capturable and fused optimisers keep their state on the stand-in device."""
    from torch.optim import adam, optimizer

    capturable = optimizer._get_capturable_supported_devices()
    fused = optimizer._get_fused_kernels_supported_devices()
    with (mock.patch.object(adam, "_get_capturable_supported_devices", return_value=[*capturable, "meta"]),
          mock.patch.object(optimizer, "_get_fused_kernels_supported_devices", return_value=[*fused, "meta"])):
        yield


def _fused_sgd_shapes(*args, **kwargs) -> None:
    """Fused SGD on the stand-in device: it updates its tensors in place and returns nothing; its
    learning rate is a device tensor read by the kernel (what the guard checks is its inputs)."""


#: torch (2.14) has no meta kernel for fused SGD with a tensor learning rate, the update a captured
#: SGD step runs
_STANDIN_KERNELS = torch.library.Library("aten", "IMPL")
if not torch._C._dispatch_has_kernel_for_dispatch_key("aten::_fused_sgd_.tensor_lr", "Meta"):
    _STANDIN_KERNELS.impl("_fused_sgd_.tensor_lr", _fused_sgd_shapes, "Meta")


def eager_reason(config: RunConfig) -> str:
    """Why the run's step is not captured on CUDA under ``compile: auto`` ("" when it is)."""
    if config.model["name"] in EAGER_MODELS:
        return EAGER_MODELS[config.model["name"]]
    plan = plan_compile("auto", torch.device("cuda"), config.recipe.optimizer.name)
    return "" if plan.mode == "cudagraphs" else plan.reason


def dataset_facts(dataset: dict) -> SimpleNamespace:
    """What building the run's model and loss needs of its data set, without loading it:
    class count, task and unlabelled target value."""
    entry = catalog.dataset(dataset["name"])
    num_classes = dataset.get("num_classes", catalog.resolve_value(entry.num_classes))
    segmentation = entry.task == "segmentation"
    meta = {"task": entry.task, **({"ignore_index": SEGMENTATION_IGNORE_INDEX} if segmentation else {})}
    return SimpleNamespace(num_classes=int(num_classes), meta=meta, segmentation=segmentation)


def example_batch(config: RunConfig, facts, n: int, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """A batch of ``n`` valid inputs for the run's model and targets in which every class occurs
    (segmentation: with some unlabelled pixels), on the CPU."""
    inputs = model_lib.spec(config.model["name"]).example_input(n, generator=generator)
    classes = facts.num_classes
    if facts.segmentation:
        shape = (inputs.shape[0], *inputs.shape[2:])
        targets = torch.arange(torch.Size(shape).numel()).reshape(shape) % classes
        targets[:, 0, 0] = SEGMENTATION_IGNORE_INDEX
    elif config.model["name"] == "tree_lstm":  # one label per node of each (N, nodes, 4) tree
        targets = torch.arange(inputs.shape[0] * inputs.shape[1]).reshape(inputs.shape[:2]) % classes
    else:
        targets = torch.arange(inputs.shape[0]) % classes
    return inputs, targets


class _Logits(torch.nn.Module):
    """A stand-in model for checking a loss alone: its output is a parameter of the run's logits' shape."""

    def __init__(self, shape) -> None:
        super().__init__()
        self.logits = torch.nn.Parameter(torch.zeros(shape))

    def forward(self, inputs: torch.Tensor) -> torch.Tensor:
        return self.logits * 1.0


def build_step(config: RunConfig, *, part: str = "run", batch: int | None = None,
               device: torch.device = STANDIN_DEVICE, epoch: int = 0):
    """The run's :class:`TrainStep` on ``device`` as a CUDA-graph run builds it (on a real device:
    as ``compile: auto`` builds it there), and one batch for
    it: model, loss (moved, then given the training targets and the epoch, in the trainer's
    order; AdaFocal with γs from a validation pass), optimiser with the graph mode's options.

    ``part``: ``"run"`` the whole step; ``"model"`` the model with cross-entropy in place of the
    run's loss; ``"loss"`` the run's loss on a stand-in model whose output is a parameter. Returns
    (step, inputs, targets)."""
    from focalcal import losses as loss_lib
    from focalcal.training.factories import (
        build_embedding_optimizer,
        build_loss,
        build_model,
        build_optimizer,
    )
    from focalcal.training.trainer import _call_hook

    facts = dataset_facts(config.dataset)
    recipe = config.recipe
    generator = torch.Generator().manual_seed(0)
    inputs, targets = example_batch(config, facts, batch or recipe.batch_size, generator)
    ignore_index = facts.meta.get("ignore_index", TOKEN_IGNORE_INDEX)
    if part == "loss":
        logits_shape = (targets.shape[0], facts.num_classes, *targets.shape[1:])
        model = _Logits(logits_shape).to(device)
        inputs = inputs[:, :0] if inputs.dim() > 1 else inputs
    else:
        model = build_model(config, facts).to(device)  # built on the CPU: initialising on meta is slow
    if part == "model":
        loss_config = {"name": "cross_entropy", **({"ignore_index": ignore_index} if facts.segmentation else {})}
        loss_fn = loss_lib.build(loss_config)
    else:
        loss_fn = build_loss(config, facts)
    if getattr(loss_fn, "needs_validation", False):  # AdaFocal: bins and γs from a validation pass
        logits = torch.randn(max(64, 4 * facts.num_classes), facts.num_classes, generator=generator) * 3
        loss_fn.update_from_validation(logits, torch.arange(logits.shape[0]) % facts.num_classes)
    loss_fn.to(device)
    _call_hook(loss_fn, "set_training_targets", targets, facts.num_classes)
    _call_hook(loss_fn, "set_epoch", epoch, recipe.epochs)
    loss_fn.validate_inputs = False  # the trainer checks every target once at load
    if device == STANDIN_DEVICE:  # as the graph mode on CUDA builds it
        plan = CompilePlan("auto", "cudagraphs")
        options = optimizer_options(recipe.optimizer.name, torch.device("cuda"), "cudagraphs")
    else:  # what a run of compile: auto on this device does
        plan = plan_compile("auto", device, recipe.optimizer.name)
        if eager_reason(config) and plan.mode == "cudagraphs":
            plan = CompilePlan("auto", "none", eager_reason(config))
        options = optimizer_options(recipe.optimizer.name, device, plan.mode)
    with _capturable_on_standin():
        optimizer = build_optimizer(model, config, **options)
        embedding_optimizer = None if part == "loss" else build_embedding_optimizer(
            model, config, **optimizer_options("sgd", torch.device("cuda") if device == STANDIN_DEVICE else device,
                                               plan.mode))
    step = TrainStep(model, model, loss_fn, optimizer,
                     lambda loss, t: descended(loss, t, recipe.loss_reduction, getattr(loss_fn, "ignore_index", None)),
                     None, grad_clip_norm=recipe.grad_clip_norm, ignore_index=ignore_index,
                     plan=plan, device=device, embedding_optimizer=embedding_optimizer)
    return step, inputs.to(device), targets.to(device)


def check_step(config: RunConfig | dict, *, part: str = "run", batch: int | None = None) -> None:
    """Run the step of ``config`` (or one ``part`` of it: :func:`build_step`) on the stand-in
    device under :class:`StepGuard`: a warm-up step, then the step a graph records; raises
    :class:`GraphUnsafe` naming the first op that would stop a capture."""
    config = RunConfig.from_dict(copy.deepcopy(config)) if isinstance(config, dict) else config
    step, inputs, targets = build_step(config, part=part, batch=batch)
    step.model.train()
    with _capturable_on_standin(), sync_free(), StepGuard():
        step._train(inputs, targets)
        if part == "model":  # the model's ops are the same in every step: the second one checks the optimiser
            for optimizer in step.optimizers:
                optimizer.step()
        else:
            step._train(inputs, targets)


def model_part(config: RunConfig) -> str:
    """What the model half of a step depends on: model, its input, optimiser, clipping, word-vector rate."""
    recipe = config.recipe
    return json.dumps([config.model, config.dataset["name"], config.recipe.optimizer.name,
                       recipe.grad_clip_norm, recipe.embedding_lr, recipe.loss_reduction], sort_keys=True, default=str)


def loss_part(config: RunConfig) -> str:
    """What the loss half of a step depends on: loss, the data's classes and task, optimiser, reduction."""
    facts = dataset_facts(config.dataset)
    recipe = config.recipe
    return json.dumps([config.loss, facts.num_classes, facts.segmentation, recipe.optimizer.name,
                       recipe.loss_reduction, recipe.grad_clip_norm, recipe.epochs], sort_keys=True, default=str)
