"""What a config's studies will cost on a GPU, before anything runs (``focalcal plan``).

The figures are those ``python -m bench gpu`` measured and wrote to ``bench/gpu_results.json``,
on the GPU it names. Where its run section (schema 3) trained a planned run of an architecture
through ``Trainer.fit`` under ``compile: auto``, an epoch costs that run's measured epoch (its
last: loading, augmentation, step, evaluation, diagnostics, checkpoint). Elsewhere, labelled as
the step's alone: the seconds per training step of the architecture on mukhoti2020's CIFAR
recipe (batch 128), in the fastest mode of the trainer that ran without failing, times the
steps of an epoch of the split's 45,000 training images: 351 full batches and the last, partial
one (evaluation, checkpoint and the rest of the epoch not counted). A run costs its recipe's
epochs times that; a study the sum over its trained runs.

Packing (``training.runs_per_gpu``) is recommended per model only where the benchmark measured
N packed runs of that model training at least :data:`PACKING_GAIN` × the images/s of one; where
it measured less, the plan says one run fills the GPU; where it measured nothing (or only the
older summed per-run rates, which overstate), that packing is unmeasured and not recommended.

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
counted and named as unmeasured, never guessed. Logit export and calibration are not counted.
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
#: Packing is recommended for a model where N packed runs train at least this × one run's images/s.
PACKING_GAIN = 1.10
PACKING_LABELS = {"without_mps": "without MPS", "with_mps": "with MPS"}
SCHEMA_2_PACKED_MODEL = "resnet50"  # bench gpu schema 2 packed ResNet-50 only


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
#: ``python -m bench translation`` (bench/RESULTS.md): CPU seconds of one step, one thread.
CPU_STEP = {"transformer-base": StepCost(677.0, 1, "2-core AMD EPYC (AVX2), 1 thread", 25_000,
                                         "bench/RESULTS.md, python -m bench translation")}


@dataclass
class StudyBudget:
    study: str
    gpu_hours: float = 0.0
    runs: int = 0  # trained runs of the study
    estimated: int = 0  # of which have a measured figure
    by_architecture: dict[str, dict] = field(default_factory=dict)  # model name -> runs, epochs, hours
    unmeasured: dict[str, int] = field(default_factory=dict)  # "dataset / model" -> runs without a figure
    models: dict[str, int] = field(default_factory=dict)  # model name -> trained runs (for the packing advice)
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
    """Per architecture, the seconds of an epoch and where they come from (``source``): ``run``,
    the run section's measured epoch (``run``, ``mode``, ``train_s``); else ``step``, the per-step
    seconds of its fastest measured mode of ours (``loop``, ``s_per_step``) times the ``steps`` of
    an epoch (the partial batch included)."""
    out = step_figures(results)
    for architecture, row in (results.get("runs") or {}).items():
        if row.get("status") == "ok" and row.get("epochs"):
            last = row["epochs"][-1]
            out[architecture] = {"source": "run", "run": row["run"], "mode": row["mode"], "epoch": last["epoch"],
                                 "s_per_epoch": last["seconds"], "train_s": last["train"], "images": row["images"]}
    return out


def step_figures(results: dict) -> dict[str, dict]:
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
            out[architecture] = {"source": "step", "loop": loop, "s_per_step": per_step[loop], "steps": steps,
                                 "s_per_epoch": per_step[loop] * steps}
    return out


def seconds_per_epoch(results: dict) -> dict[str, float]:
    """Each measured architecture's epoch on 45,000 images: the run's, else its step's (:func:`epoch_figures`)."""
    return {architecture: figure["s_per_epoch"] for architecture, figure in epoch_figures(results).items()}


def measurement(results: dict) -> str:
    """Which measurement the step figures come from, in words."""
    if "schema" not in results:
        steps = -(-LEGACY_TRAIN_IMAGES // int(results.get("batch_size", 128)))
        return (f"{results.get('steps_per_epoch')}-batch epochs, per-step time × {steps} steps per epoch (the "
                "partial batch counted as a full one)")
    epoch = results["epoch"]
    return (f"full epochs of {epoch['images']:,} images ({epoch['full_batches']} batches of {epoch['batch']} and "
            f"one of {epoch['partial_batch']}), per-step time × {epoch['steps']} steps")


def packing_rows(results: dict) -> dict[str, dict[str, dict[int, float]]]:
    """Per model, packed runs' images/s per count of runs, by how they were measured (``without
    MPS`` / ``with MPS``: all images ÷ wall time). Schema 3 packs several models; schema 2 packed
    ResNet-50; older results summed the workers' own rates, which overstates, and count as none."""
    packing = results.get("packing") or []
    if isinstance(packing, list):
        return {}
    by_model = packing if results.get("schema", 2) >= 3 else (
        {results.get("packing_model", SCHEMA_2_PACKED_MODEL): packing} if packing else {})
    return {model: {PACKING_LABELS[key]: {row["runs"]: row["images_per_s"] for row in section.get("rows", [])
                                          if row.get("status") == "ok"}
                    for key, section in sections.items() if key in PACKING_LABELS}
            for model, sections in by_model.items()}


def packing_advice(results: dict, models) -> list[str]:
    """One line per model: packing recommended (measured to gain at least :data:`PACKING_GAIN` ×),
    one run fills the GPU (measured to gain less), or packing unmeasured (not recommended)."""
    measured = packing_rows(results)
    lines = []
    for model in sorted(models):
        best = None  # (gain, runs, how)
        for how, rates in measured.get(model, {}).items():
            for runs, rate in rates.items():
                if runs > 1 and 1 in rates and (best is None or rate / rates[1] > best[0]):
                    best = (rate / rates[1], runs, how)
        if best is None:
            legacy = isinstance(results.get("packing"), list) and model == SCHEMA_2_PACKED_MODEL
            why = ("the older results summed each packed run's own rate, which overstates" if legacy
                   else f"bench gpu packed no {model} runs beside one")
            lines.append(f"  {model}: packing unmeasured ({why}); not recommended: one run per GPU")
        elif best[0] >= PACKING_GAIN:
            gain, runs, how = best
            lines.append(f"  {model}: {runs} packed runs per GPU {how} trained {gain:.2f}× the images/s of one: "
                         f"training.runs_per_gpu: {runs} divides its GPU-hours by {gain:.2f}")
        else:
            gain, runs, how = best
            lines.append(f"  {model}: one run fills the GPU ({runs} packed runs {how} trained {gain:.2f}× the images/s "
                         "of one); keep training.runs_per_gpu: 1")
    return lines


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
            budget.models[model] = budget.models.get(model, 0) + 1
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
    commit = results.get("commit") or f"none recorded ({results.get('commit_source') or 'no reason given'})"
    figures = epoch_figures(results)
    has_runs = any(f["source"] == "run" for f in figures.values())
    lines = [(f"Training budget on {measured}, one run per GPU, from {results_path}, measured on {measured} by "
              f"`python -m bench gpu` (torch {results.get('torch')}, {results.get('date')}, commit {commit}): "
              + ("the run's epoch (Trainer.fit under compile: auto) where its run section trained the architecture; "
                 "elsewhere the step's alone, " if has_runs else
                 "the step's figures alone: this results file has no run section (a real run's epoch through "
                 "Trainer.fit, bench gpu's schema 3), so evaluation, checkpoint and the rest of the epoch are not "
                 "counted; ") + f"{measurement(results)}:")]
    for budget in budgets:
        lines.append(f"  {budget.study}: {budget.gpu_hours:,.1f} GPU-hours for {budget.estimated} of its "
                     f"{budget.runs} training runs")
        for model, entry in sorted(budget.by_architecture.items()):
            f = figures[model]
            if f["source"] == "run":
                how = (f"the run's epoch: {f['run']} under compile: auto ({f['mode']}), epoch {f['epoch']} of "
                       f"{f['images']:,} images, {f['s_per_epoch']:.2f} s, of which training {f['train_s']:.2f} s")
            else:
                how = (f"{'the step only, ' if has_runs else ''}{f['loop']}: {1000 * f['s_per_step']:.1f} ms/step × "
                       f"{f['steps']} = {f['s_per_epoch']:.2f} s per epoch")
            lines.append(f"    {model}: {entry['runs']} runs, {entry['epochs']:,} epochs, {entry['gpu_hours']:,.1f} "
                         f"GPU-hours ({how})")
        for name, count in sorted(budget.unmeasured.items()):
            lines.append(f"    {name}: {count} runs not measured (no figure for this architecture and data)")
        lines += translation_lines(budget)
    models = {model for budget in budgets for model in budget.models}
    if models:
        lines.append(f"Packing (training.runs_per_gpu), recommended only where measured to gain at least "
                     f"{PACKING_GAIN:.2f}× on {measured}:")
        lines += packing_advice(results, models)
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
