"""Load a run's checkpoint without running code from it.

A checkpoint is a pickle, and ``torch.load(weights_only=False)`` executes whatever a pickle's
``__reduce__`` asks for: a ``checkpoint.pt`` copied from elsewhere, or tampered with in a
shared ``results/``, could run anything the moment a job resumes or exports it. The trainer's
checkpoints hold only tensors, numbers, strings, lists, dicts and the ``Counter`` that
``MultiStepLR`` keeps its milestones in, so they load with ``weights_only=True`` and that one
allowed class; anything else is refused before a single object is built.
"""

from __future__ import annotations

import collections
import io
import pickle
from pathlib import Path

import torch

from focalcal._io import verified_bytes
from focalcal._remake import remake_hint

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
