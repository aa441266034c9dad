"""What a config's studies will cost on a GPU, before anything runs (``focalcal plan``).

The figures are those ``python -m bench gpu`` measured and wrote to ``bench/gpu_results.json``:
seconds per training epoch of each architecture on mukhoti2020's CIFAR split (45,000 images
of 32×32, batch 128), in the fastest mode the trainer has. A run costs its recipe's epochs
times that figure; a study costs the sum over its trained runs. Only runs whose model and
data the benchmark measured get a figure (an architecture on CIFAR-10/100); the others, and
every run when no figures exist for the GPU asked about, are counted and named as unmeasured,
never guessed. Evaluation, logit export and calibration are not counted (a few percent of a
paper-scale run's epoch time).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from focalcal.training.config import Recipe

#: The data the benchmark's epochs stand for: CIFAR-shaped images, 45,000 per epoch.
MEASURED_DATASETS = ("cifar10", "cifar100")


@dataclass
class StudyBudget:
    study: str
    gpu_hours: float = 0.0
    runs: int = 0  # trained runs of the study
    estimated: int = 0  # of which have a measured figure
    by_architecture: dict[str, dict] = field(default_factory=dict)  # model name -> runs, epochs, hours
    unmeasured: dict[str, int] = field(default_factory=dict)  # "dataset / model" -> runs without a figure


def load_gpu_results(path) -> dict | None:
    """``bench/gpu_results.json``, or None where the benchmark has not written one."""
    path = Path(path)
    if not path.exists():
        return None
    try:
        return json.loads(path.read_text())
    except json.JSONDecodeError as error:
        raise ValueError(f"{path} is not valid JSON ({error}); re-run `python -m bench gpu`") from None


def seconds_per_epoch(results: dict) -> dict[str, float]:
    """Each measured architecture's epoch on 45,000 images, in its fastest mode of ours."""
    out = {}
    for architecture, rows in results.get("architectures", {}).items():
        ours = [row["s_per_epoch_45k"] for name, row in rows.items() if name not in ("reference", "fp32 none")]
        if ours:
            out[architecture] = min(ours)
    return out


def study_budgets(plan, results: dict | None) -> list[StudyBudget]:
    """One :class:`StudyBudget` per study of ``plan``; without ``results`` nothing is estimated."""
    per_epoch = seconds_per_epoch(results) if results else {}
    config = plan.config
    budgets = []
    for key, study in plan.studies.items():
        budget = StudyBudget(key)
        for run in study.runs:
            if run.imported:
                continue
            budget.runs += 1
            model = config["models"][run.model]["name"]
            dataset = config["datasets"][run.dataset]["name"]
            epochs = int(config["recipes"][run.recipe].get("epochs", Recipe.epochs))
            if model in per_epoch and dataset in MEASURED_DATASETS:
                hours = epochs * per_epoch[model] / 3600
                budget.gpu_hours += hours
                budget.estimated += 1
                entry = budget.by_architecture.setdefault(model, {"runs": 0, "epochs": 0, "gpu_hours": 0.0})
                entry["runs"] += 1
                entry["epochs"] += epochs
                entry["gpu_hours"] += hours
            else:
                name = f"{dataset} / {model}"
                budget.unmeasured[name] = budget.unmeasured.get(name, 0) + 1
        budgets.append(budget)
    return budgets


def describe(budgets: list[StudyBudget], results: dict | None, results_path, gpu: str | None = None) -> str:
    """The budget in words, one block per study; ``gpu``: the GPU the user will run on (None:
    the one measured). Says plainly when there is no figure for that GPU."""
    if results is None:
        head = (f"No GPU figures: {results_path} does not exist. Run `python -m bench gpu` on the GPU the "
                "studies will train on; until then no study's GPU-hours can be stated.")
        return "\n".join([head] + [f"  {b.study}: {b.runs} training runs, GPU-hours not measured" for b in budgets])
    measured = results.get("device", "an unnamed GPU")
    if gpu is not None and gpu.lower() not in measured.lower():
        head = (f"No figures were measured on {gpu}: {results_path} holds {measured}'s "
                f"(torch {results.get('torch')}, {results.get('date')}). Run `python -m bench gpu` on {gpu}.")
        return "\n".join([head] + [f"  {b.study}: {b.runs} training runs, GPU-hours not measured" for b in budgets])
    lines = [(f"Training budget on {measured}, one run per GPU, from {results_path} (torch {results.get('torch')}, "
              f"{results.get('date')}, commit {results.get('commit')}):")]
    for budget in budgets:
        lines.append(f"  {budget.study}: {budget.gpu_hours:,.1f} GPU-hours for {budget.estimated} of its "
                     f"{budget.runs} training runs")
        for model, entry in sorted(budget.by_architecture.items()):
            lines.append(f"    {model}: {entry['runs']} runs, {entry['epochs']:,} epochs, {entry['gpu_hours']:,.1f} GPU-hours")
        for name, count in sorted(budget.unmeasured.items()):
            lines.append(f"    {name}: {count} runs not measured (no figure for this architecture and data)")
    packing = {row["runs"]: row["images_per_s"] for row in results.get("packing") or []}
    if 1 in packing and len(packing) > 1:
        runs = max(packing, key=packing.get)
        lines.append(f"Packed {runs} runs per GPU, the benchmark's ResNet-50 runs together trained "
                     f"{packing[runs] / packing[1]:.2f}× the images/s of one: divide by that for GPU-hours with "
                     f"training.runs_per_gpu: {runs}.")
    return "\n".join(lines)
