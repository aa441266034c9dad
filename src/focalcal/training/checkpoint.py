"""Load a run's checkpoint without running code from it; copy one to the CPU and write it in the background.

A checkpoint is a pickle, and ``torch.load(weights_only=False)`` executes whatever a pickle's
``__reduce__`` asks for: a ``checkpoint.pt`` copied from elsewhere, or tampered with in a
shared ``results/``, could run anything the moment a job resumes or exports it. The trainer's
checkpoints hold only tensors, numbers, strings, lists, dicts and the ``Counter`` that
``MultiStepLR`` keeps its milestones in, so they load with ``weights_only=True`` and that one
allowed class; anything else is refused before a single object is built.
"""

from __future__ import annotations

import collections
import copy
import io
import pickle
import threading
import time
from pathlib import Path

import torch

from focalcal.files.artefacts import verified_bytes
from focalcal.files.remake import remake_hint

# The only non-builtin class a trainer checkpoint holds (MultiStepLR.state_dict()["milestones"]).
SAFE_GLOBALS = [collections.Counter]


class UnsafeCheckpointError(pickle.UnpicklingError):
    """The file asks to build objects a focalcal checkpoint never holds; nothing was executed."""


class UnreadableCheckpointError(ValueError):
    """The file is not a readable checkpoint (truncated, overwritten, not a torch file)."""


def load_checkpoint(path, device="cpu") -> dict:
    """The state dict saved by :meth:`Trainer.save`, loaded with ``weights_only=True``."""
    path = Path(path)
    payload = verified_bytes(path)  # a size/sha256 mismatch with its sidecar: CorruptArtefactError, named
    try:
        with torch.serialization.safe_globals(SAFE_GLOBALS):
            state = torch.load(io.BytesIO(payload), map_location=device, weights_only=True)
    except pickle.UnpicklingError as error:
        raise UnsafeCheckpointError(
            f"refusing to load {path}: it asks to build Python objects that a focalcal checkpoint never "
            f"holds, so it was not written by focalcal's trainer or was altered; nothing in it was executed "
            f"({_first_line(error)}). Delete it and retrain the run, or load it yourself only if you trust "
            "where it came from"
        ) from None
    except (RuntimeError, EOFError, OSError, ValueError) as error:
        raise UnreadableCheckpointError(
            f"{path} is not a readable checkpoint ({_first_line(error)}); it is truncated or was overwritten. "
            f"Re-make it: {remake_hint(path)}"
        ) from None
    if not isinstance(state, dict) or "fingerprint" not in state:
        raise UnreadableCheckpointError(f"{path} holds {type(state).__name__}, not a focalcal trainer checkpoint")
    return state


def foreign_checkpoint(state: dict, config) -> str | None:
    """Why ``state`` (a loaded checkpoint) is not one of the run ``config`` describes, or None.

    The one fingerprint check: resuming and exporting a run refuse such a checkpoint, and
    ``focalcal verify`` names one copied in from another run."""
    if state["fingerprint"] != config.fingerprint():
        return f"belongs to a run with different settings (fingerprint {state['fingerprint']} != {config.fingerprint()})"
    return None


def final_weights(state: dict) -> dict:
    """The model weights a finished run reports, from its state (a loaded checkpoint or
    :meth:`Trainer.state`): the kept best epoch's (early stopping, ``recipe.select``), else the
    mean of the last snapshots (``recipe.average_checkpoints``), else the last epoch's. The
    logits are dumped from them and the decodes beam-search with them."""
    from focalcal.training.averaging import mean_of_snapshots

    best = (state.get("best") or {}).get("model")
    if best is not None:
        return best
    return mean_of_snapshots(state["snapshots"]) if "snapshots" in state else state["model"]


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


def cpu_snapshot(state):
    """A copy of ``state`` (the trainer's checkpoint dict) that further training cannot change: every
    tensor copied to the CPU, every container copied, Python scalars shared. Tensors that share a
    storage still share one copy (tied weights stay tied), and each copy keeps its storage's size,
    offset and strides, so ``torch.save`` writes the bytes it would have written from the live
    state on the CPU; a CUDA state comes back as CPU tensors (``load_checkpoint`` maps them to the
    run's device). The copy is synchronous: it is what lets the write run in the background."""
    storages: dict[int, torch.UntypedStorage] = {}  # by the storage itself, as torch.save tells them apart
    memo: dict[int, object] = {}

    def copy_tensor(tensor: torch.Tensor) -> torch.Tensor:
        storage = tensor.untyped_storage()
        key = storage._cdata  # the StorageImpl's address: torch.serialization's own key
        if key not in storages:
            storages[key] = storage.cpu() if tensor.device.type != "cpu" else storage.clone()
        copied = torch.empty((), dtype=tensor.dtype).set_(storages[key], tensor.storage_offset(), tensor.size(),
                                                           tensor.stride())
        if isinstance(tensor, torch.nn.Parameter):
            return torch.nn.Parameter(copied, requires_grad=tensor.requires_grad)
        return copied.requires_grad_(tensor.requires_grad) if tensor.requires_grad else copied

    def visit(value) -> None:
        if torch.is_tensor(value):
            if id(value) not in memo:
                memo[id(value)] = copy_tensor(value)
        elif isinstance(value, dict):
            for item in value.values():
                visit(item)
        elif isinstance(value, (list, tuple)):
            for item in value:
                visit(item)

    visit(state)
    return copy.deepcopy(state, memo)  # the containers (their types and attributes kept), the tensors from memo


class BackgroundWriter:
    """Runs one write at a time in a background thread, so an epoch's checkpoint is serialised and
    written while the next epoch trains (``background=False``: in the caller's thread, at once,
    its error raised by :meth:`submit` itself).
    :meth:`submit` first waits for the write before it; :meth:`join` waits for the current one,
    raises what it raised and returns its seconds. The trainer joins before the next write, when
    ``fit`` returns or raises, and before anything reads the checkpoint. Each write is atomic (a
    sibling renamed into place), so a run killed mid-write resumes from the last complete
    checkpoint."""

    def __init__(self, background: bool = True) -> None:
        self.background = background
        self._thread: threading.Thread | None = None
        self._done = False  # a write ran that join() has not reported yet
        self._error: BaseException | None = None
        self._seconds = 0.0

    def submit(self, write) -> None:
        self.join()

        def run() -> None:
            started = time.perf_counter()
            try:
                write()
            except BaseException as error:  # noqa: BLE001  raised in the training thread by join()
                self._error = error
            finally:
                self._seconds = time.perf_counter() - started

        self._done = True
        if not self.background:
            run()
            if self._error is not None:
                self.join()  # written in place: its error is raised at once, not at the next write
            return
        self._thread = threading.Thread(target=run, name="focalcal-checkpoint-write")
        self._thread.start()

    @property
    def pending(self) -> bool:
        """Whether a write runs in the background now."""
        return self._thread is not None and self._thread.is_alive()

    def join(self) -> float | None:
        """Wait for the last write; its seconds (None: no write since the last join), or its error."""
        thread, self._thread = self._thread, None
        if thread is not None:
            thread.join()
        done, self._done = self._done, False
        error, self._error = self._error, None
        if error is not None:
            raise error
        return self._seconds if done else None
