"""Checkpoint averaging (Vaswani et al. 2017 §6.1), counted in steps.

Vaswani et al. report "a single model obtained by averaging the last 5 checkpoints, which were
written at 10-minute intervals". Minutes depend on the machine, so ``recipe.average_checkpoints``
counts optimiser steps: a snapshot of the model's state after every ``every_steps``-th step and
one after the run's last step, so the weights training ends with are among them; the run's
final weights are the element-wise mean of the last ``count`` snapshots. The snapshots travel
in the run's checkpoint, so a resumed run averages the same ones.
"""

from __future__ import annotations

import torch


class CheckpointAverage:
    """The last ``count`` snapshots of a model's state, taken every ``every_steps`` steps and at the end."""

    def __init__(self, count: int, every_steps: int):
        self.count, self.every_steps = int(count), int(every_steps)
        self.snapshots: list[dict] = []  # {"step": int, "model": state dict}, oldest first
        self.last_step = 0  # the last step this process trained, for the end-of-training snapshot

    @classmethod
    def for_recipe(cls, recipe) -> CheckpointAverage | None:
        option = recipe.average_checkpoints
        return None if option is None else cls(option["count"], option["every_steps"])

    def after_step(self, step: int, model: torch.nn.Module) -> None:
        """Call after optimiser step ``step`` (1-based, counted over the whole run)."""
        self.last_step = step
        if step % self.every_steps == 0:
            self._take(step, model)

    def finish(self, model: torch.nn.Module) -> None:
        """At the end of training: the last step's weights are a snapshot too."""
        if self.last_step and (not self.snapshots or self.snapshots[-1]["step"] != self.last_step):
            self._take(self.last_step, model)

    def _take(self, step: int, model: torch.nn.Module) -> None:
        self.snapshots.append(
            {"step": int(step), "model": {k: v.detach().clone() for k, v in model.state_dict().items()}}
        )
        del self.snapshots[: -self.count]

    @property
    def steps(self) -> list[int]:
        """The steps of the snapshots the mean is taken over."""
        return [snapshot["step"] for snapshot in self.snapshots]

    def mean(self) -> dict[str, torch.Tensor]:
        """The snapshots' element-wise mean (:func:`mean_of_snapshots`)."""
        return mean_of_snapshots(self.snapshots)

    def state(self) -> list[dict]:
        return self.snapshots

    def load_state(self, snapshots: list[dict]) -> None:
        self.snapshots = list(snapshots)


def mean_of_snapshots(snapshots: list[dict]) -> dict[str, torch.Tensor]:
    """The element-wise mean of snapshots' model states (``{"step", "model"}``, oldest first),
    summed in float64 oldest first and cast back to each entry's dtype; an integer entry (a step
    counter) is the last snapshot's."""
    if not snapshots:
        raise ValueError("recipe.average_checkpoints: no snapshot was taken; the run has trained no step")
    states = [snapshot["model"] for snapshot in snapshots]
    mean = {}
    for key, last in states[-1].items():
        if not last.is_floating_point():
            mean[key] = last.clone()
            continue
        total = states[0][key].double()
        for state in states[1:]:
            total = total + state[key].double()
        mean[key] = (total / len(states)).to(last.dtype)
    return mean
