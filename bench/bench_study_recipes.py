"""Every shipped study's recipe trains under ``compile: auto``: one short epoch of each on the device.

For each distinct (data set, model, loss, recipe) that ``config/studies/*.yaml`` plans, the run's
real step (:func:`focalcal.training.graph_safety.build_step`: model, loss with its state,
optimiser as ``compile: auto`` builds them on this device) trains one short epoch on random
stand-in inputs of the model's input shape (the real data sets are not on the benchmark
machine): ``--batches`` full batches of the recipe's batch size (capped by ``--batch``) — on
CUDA three eager warm-up steps, the capture, then replays — then the epoch's last, partial
batch of half that size (the papers' loaders keep it), then the epoch's read-back of its
totals. A run passes when that finishes with a finite loss in the mode it was planned for; a
capture that failed and fell back to eager (``step.plan`` changed) fails, with its reason. The
mode that ran (cudagraphs, or eager and why) is printed beside it.

    PYTHONPATH=src python -m bench.bench_study_recipes --device cuda --out results.json
    PYTHONPATH=src python -m bench.bench_study_recipes --device cpu --batches 5 --batch 2 --match resnet8/  # smoke
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
import traceback
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
STUDIES = sorted((ROOT / "config" / "studies").glob("*.yaml"))


def study_runs():
    """The studies' distinct runs, planned by the project's own code (no schema: jsonschema may be absent)."""
    from focalcal.pipeline.plan import planned_runs

    return planned_runs(STUDIES)


def train_one(run_config: dict, device: torch.device, batches: int, batch: int | None) -> dict:
    """One short epoch of the run's real step on ``device`` (the module's docstring): the mode
    that ran, the mean loss, and whether it passed."""
    from focalcal.training.config import RunConfig
    from focalcal.training.graph_safety import build_step

    config = RunConfig.from_dict(run_config)
    size = min(batch or config.recipe.batch_size, config.recipe.batch_size)
    step, inputs, targets = build_step(config, device=device, batch=size)
    planned = step.plan.mode
    partial = size // 2
    step.model.train()
    step.begin_epoch()
    started = time.perf_counter()
    for _ in range(batches):
        step.step(inputs, targets)
    if partial:
        step.step(inputs[:partial], targets[:partial])
    totals = step.end_epoch().read()
    seconds = time.perf_counter() - started
    loss = totals["loss_sum"] / (batches * inputs.shape[0] + partial)
    kept_mode = step.plan.mode == planned  # a failed capture falls back to eager and says why in step.plan
    return {"mode": step.plan.mode, "reason": step.plan.reason, "loss": loss, "seconds": seconds,
            "batches": batches, "batch": size, "partial_batch": partial,
            "passed": math.isfinite(loss) and totals["first_bad"] < 0 and kept_mode}


def one_per_model(runs: list) -> list:
    """The first run of each model architecture (a smoke subset)."""
    seen, out = set(), []
    for run in runs:
        if run.run_config["model"]["name"] not in seen:
            seen.add(run.run_config["model"]["name"])
            out.append(run)
    return out


def main(quick: bool = False, argv=None) -> int:
    """``python -m bench study_recipes [--quick]`` (argv: this module's own flags when run alone)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--batches", type=int, default=12, help="steps per run (3 warm-up + capture + replays)")
    parser.add_argument("--batch", type=int, default=None, help="cap on the batch size (default: the recipe's)")
    parser.add_argument("--limit", type=int, default=None, help="only the first N runs (smoke test)")
    parser.add_argument("--match", default="", help="only runs whose label contains this (e.g. 'wce')")
    parser.add_argument("--one-per-model", action="store_true", help="only the first run of each architecture")
    parser.add_argument("--out", default=None, help="write the results as JSON here")
    parser.add_argument("--shard", default="0/1", help="K/N: only every N-th run from the K-th (several processes "
                                                       "on one GPU)")
    arguments = parser.parse_args([] if argv is None and __name__ != "__main__" else argv)
    if quick:
        arguments.batches, arguments.batch = min(arguments.batches, 5), min(arguments.batch or 32, 32)
    device = torch.device(arguments.device)
    shard, shards = (int(part) for part in arguments.shard.split("/"))
    runs = [run for run in study_runs() if arguments.match in run.label]
    runs = (one_per_model(runs) if arguments.one_per_model else runs)[: arguments.limit][shard::shards]
    results, failed = [], 0
    print(f"study recipes under compile: auto on {device}: {len(runs)} runs, one epoch each of {arguments.batches} "
          f"full batches and a partial batch of half the size", flush=True)
    for run in runs:
        try:
            row = train_one(run.run_config, device, arguments.batches, arguments.batch)
        except Exception as error:  # noqa: BLE001  a failure is a result to report, not the end of the bench
            row = {"passed": False, "error": f"{type(error).__name__}: {error}".splitlines()[0][:300],
                   "traceback": traceback.format_exc()[-2000:]}
        finally:
            if device.type == "cuda":
                torch.cuda.empty_cache()
        row = {"run": run.label, "configs": list(run.configs), **row}
        failed += not row["passed"]
        results.append(row)
        what = (f"{row['mode']:<10} {row['seconds']:6.2f} s  loss {row['loss']:.4g}" if "mode" in row
                else row["error"])
        reason = f"  ({row['reason']})" if row.get("reason") and (row.get("mode") != "cudagraphs" or not row["passed"]) else ""
        print(f"{'PASS' if row['passed'] else 'FAIL'}  {run.label:<60} {what}{reason}", flush=True)
    print(f"{len(runs) - failed}/{len(runs)} passed", flush=True)
    if arguments.out:
        Path(arguments.out).write_text(json.dumps({"device": str(device), "torch": torch.__version__,
                                                   "gpu": torch.cuda.get_device_name() if device.type == "cuda" else None,
                                                   "batches": arguments.batches, "runs": results}, indent=1))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(argv=sys.argv[1:]))
