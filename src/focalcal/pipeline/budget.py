"""What a config's studies will cost on a GPU, before anything runs (``focalcal plan``).

The figures are those ``python -m bench gpu`` measured and wrote to ``bench/gpu_results.json``:
the seconds per training step of each architecture on mukhoti2020's CIFAR recipe (batch 128),
in the fastest mode of the trainer that ran without failing. An epoch costs that per-step time
times the steps of an epoch of the split's 45,000 training images: 351 full batches and the last,
partial one. A run costs its recipe's epochs times that; a study the sum over its trained runs.

The benchmark's results (schema 2) time full epochs, so the per-step time is the epoch's
seconds over its steps. Older results (no ``schema``) timed 100-batch epochs: their per-step
time is those seconds over 100, the partial batch then counted as a full step. The plan says
which of the two, and which GPU, its figures come from.

A translation run (mukhoti2020 §5.2) trains ``recipe.max_steps`` batches of about
``recipe.max_tokens`` tokens, not epochs of images; ``bench gpu`` does not time it. Its lines
say its steps, the published cost of such a step (Vaswani et al. 2017 §5.2: 0.4 s per step of
the base model on 8 P100 GPUs, hence P100 GPU-hours) and the CPU cost measured here
(:data:`CPU_STEP`, ``python -m bench translation``); it is counted as unmeasured on the GPU.

Only runs whose model and data the benchmark measured get a figure (an architecture on
CIFAR-10/100); the others, and every run when no figures exist for the GPU asked about, are
counted and named as unmeasured, never guessed. Evaluation, logit export and calibration are
not counted (a few percent of a paper-scale run's epoch time).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from focalcal.training.config import Recipe

#: The data the benchmark's epochs stand for: CIFAR-shaped images, 45,000 per epoch.
MEASURED_DATASETS = ("cifar10", "cifar100")
#: Older results do not record their epoch: mukhoti2020's split, at their ``batch_size``.
LEGACY_TRAIN_IMAGES = 45_000
#: Loops that are not the trainer's own mode: the authors' loop, and the fp32 eager baseline.
NOT_OURS = ("reference", "fp32 none")


@dataclass(frozen=True)
class StepCost:
    """The cost of one training step of a translation model at ``tokens`` tokens a batch."""

    seconds: float
    devices: int
    device: str
    tokens: int
    source: str


#: Vaswani et al. 2017 §5.2: "each training step took about 0.4 seconds" for the base model on
#: "one machine with 8 NVIDIA P100 GPUs", batches of about 25,000 source and target tokens.
PUBLISHED_STEP = {"transformer-base": StepCost(0.4, 8, "NVIDIA P100", 25_000, "Vaswani et al. 2017 §5.2")}
#: ``python -m bench translation`` (bench/README.md): CPU seconds of one step, one thread.
CPU_STEP = {"transformer-base": StepCost(677.0, 1, "2-core AMD EPYC (AVX2), 1 thread", 25_000,
                                         "bench/README.md, python -m bench translation")}


@dataclass
class StudyBudget:
    study: str
    gpu_hours: float = 0.0
    runs: int = 0  # trained runs of the study
    estimated: int = 0  # of which have a measured figure
    by_architecture: dict[str, dict] = field(default_factory=dict)  # model name -> runs, epochs, hours
    unmeasured: dict[str, int] = field(default_factory=dict)  # "dataset / model" -> runs without a figure
    steps: dict[str, dict] = field(default_factory=dict)  # translation model name -> runs, steps, tokens a step


def load_gpu_results(path) -> dict | None:
    """``bench/gpu_results.json``, or None where the benchmark has not written one."""
    path = Path(path)
    if not path.exists():
        return None
    try:
        return json.loads(path.read_text())
    except json.JSONDecodeError as error:
        raise ValueError(f"{path} is not valid JSON ({error}); re-run `python -m bench gpu`") from None


def epoch_figures(results: dict) -> dict[str, dict]:
    """Per architecture: the per-step seconds of its fastest measured mode of ours, that mode,
    the steps of an epoch (the partial batch included) and their product, the epoch's seconds."""
    legacy = "schema" not in results
    if legacy:
        batch = int(results.get("batch_size", 128))
        steps = -(-LEGACY_TRAIN_IMAGES // batch)
    else:
        steps = int(results["epoch"]["steps"])
    out = {}
    for architecture, rows in results.get("architectures", {}).items():
        per_step = {}
        for name, row in rows.items():
            if name in NOT_OURS:
                continue
            if legacy and "error" not in row:
                per_step[name] = row["seconds"] / results["steps_per_epoch"]
            elif not legacy and row.get("status") == "ok":
                per_step[name] = row["s_per_step"]
        if per_step:
            loop = min(per_step, key=per_step.get)
            out[architecture] = {"loop": loop, "s_per_step": per_step[loop], "steps": steps,
                                 "s_per_epoch": per_step[loop] * steps}
    return out


def seconds_per_epoch(results: dict) -> dict[str, float]:
    """Each measured architecture's epoch on 45,000 images, in its fastest mode of ours."""
    return {architecture: figure["s_per_epoch"] for architecture, figure in epoch_figures(results).items()}


def measurement(results: dict) -> str:
    """Which measurement the figures come from, in words."""
    if "schema" not in results:
        steps = -(-LEGACY_TRAIN_IMAGES // int(results.get("batch_size", 128)))
        return (f"{results.get('steps_per_epoch')}-batch epochs, per-step time × {steps} steps per epoch (the "
                "partial batch counted as a full one)")
    epoch = results["epoch"]
    return (f"full epochs of {epoch['images']:,} images ({epoch['full_batches']} batches of {epoch['batch']} and "
            f"one of {epoch['partial_batch']}), per-step time × {epoch['steps']} steps")


def packing_rows(results: dict) -> dict[str, dict[int, float]]:
    """Packed runs' images/s per count of runs, by how they were measured: older results summed
    the workers' own rates; schema 2 has ``without MPS`` / ``with MPS``, all images ÷ wall time."""
    packing = results.get("packing") or []
    if isinstance(packing, list):
        return {"(summed from each run's own rate, not over the wall time)": {row["runs"]: row["images_per_s"]
                                                                                for row in packing}}
    labels = {"without_mps": "without MPS", "with_mps": "with MPS"}
    return {labels[key]: {row["runs"]: row["images_per_s"] for row in section.get("rows", []) if row.get("status") == "ok"}
            for key, section in packing.items() if key in labels}


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
            recipe = config["recipes"][run.recipe]
            epochs = int(recipe.get("epochs", Recipe.epochs))
            if run.translation and recipe.get("max_steps"):
                entry = budget.steps.setdefault(model, {"runs": 0, "steps": 0, "tokens": recipe.get("max_tokens")})
                entry["runs"] += 1
                entry["steps"] += int(recipe["max_steps"])
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
        return "\n".join([head] + unmeasured_lines(budgets))
    measured = results.get("device", "an unnamed GPU")
    if gpu is not None and gpu.lower() not in measured.lower():
        head = (f"No figures were measured on {gpu}: {results_path} holds {measured}'s "
                f"(torch {results.get('torch')}, {results.get('date')}). Run `python -m bench gpu` on {gpu}.")
        return "\n".join([head] + unmeasured_lines(budgets))
    lines = [(f"Training budget on {measured}, one run per GPU, from {results_path}: {measurement(results)}, "
              f"measured by `python -m bench gpu` (torch {results.get('torch')}, {results.get('date')}, commit "
              f"{results.get('commit')}):")]
    figures = epoch_figures(results)
    for budget in budgets:
        lines.append(f"  {budget.study}: {budget.gpu_hours:,.1f} GPU-hours for {budget.estimated} of its "
                     f"{budget.runs} training runs")
        for model, entry in sorted(budget.by_architecture.items()):
            f = figures[model]
            lines.append(f"    {model}: {entry['runs']} runs, {entry['epochs']:,} epochs, {entry['gpu_hours']:,.1f} GPU-hours "
                         f"({f['loop']}: {1000 * f['s_per_step']:.1f} ms/step × {f['steps']} = {f['s_per_epoch']:.2f} s "
                         "per epoch)")
        for name, count in sorted(budget.unmeasured.items()):
            lines.append(f"    {name}: {count} runs not measured (no figure for this architecture and data)")
        lines += translation_lines(budget)
    best = None  # (speed-up, runs, how) of the best packing measured
    for how, rates in packing_rows(results).items():
        if 1 in rates and len(rates) > 1:
            runs = max(rates, key=rates.get)
            if best is None or rates[runs] / rates[1] > best[0]:
                best = (rates[runs] / rates[1], runs, how)
    if best is not None:
        speedup, runs, how = best
        lines.append(f"Packed {runs} runs per GPU {how}, the benchmark's ResNet-50 runs together "
                     f"trained {speedup:.2f}× the images/s of one: divide by that for GPU-hours with "
                     f"training.runs_per_gpu: {runs}.")
    return "\n".join(lines)


def unmeasured_lines(budgets: list[StudyBudget]) -> list[str]:
    """Each study's runs when no GPU figure applies, with its translation runs' step costs."""
    lines = []
    for budget in budgets:
        lines.append(f"  {budget.study}: {budget.runs} training runs, GPU-hours not measured")
        lines += translation_lines(budget)
    return lines


def translation_lines(budget: StudyBudget) -> list[str]:
    """A study's translation runs: their steps, the published GPU cost of a step and the CPU cost measured here."""
    lines = []
    for model, entry in sorted(budget.steps.items()):
        tokens = f"about {entry['tokens']:,} tokens" if entry["tokens"] else "batch_size pairs"
        line = f"    {model}: {entry['runs']} runs, {entry['steps']:,} steps of {tokens}"
        published, cpu = PUBLISHED_STEP.get(model), CPU_STEP.get(model)
        if published is not None:
            hours = entry["steps"] * published.seconds * published.devices / 3600
            line += (f"; published: {published.seconds} s per step on {published.devices} {published.device} GPUs "
                     f"({published.source}), {hours:,.1f} {published.device} GPU-hours")
        if cpu is not None and cpu.seconds > 0:
            line += (f"; measured here: {cpu.seconds:,.0f} CPU s per {cpu.tokens:,}-token step on {cpu.device} "
                     f"({cpu.source}), {entry['steps'] * cpu.seconds / 86400:,.0f} CPU-days")
        lines.append(line)
    return lines
