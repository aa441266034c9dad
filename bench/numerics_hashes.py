"""The golden runs' logit hashes on this machine, under the pins and the variants tried.

    python -m bench.numerics_hashes                       # pinned: what tests/test_golden_numerics.py checks
    python -m bench.numerics_hashes --variants all        # every variant below, for another CPU vendor
    python -m bench.numerics_hashes --layers              # one step's per-module hashes, to find an op

Prints one JSON line per (run, variant): the machine class, the variables set, whether the hashes
equal ``tests/golden/numerics_logits.json``, and the hashes. A variant whose hashes agree on two
machine classes is a candidate for ``focalcal.core.pinned_numerics``' pins; ``bench/README.md`` ("Pinned CPU
numerics") holds what was measured on each class. ``--layers`` trains one batch of each run and
hashes every module's output and the gradient of its output, so that two machines that differ
can see where they part. Each run trains in its own process (``focalcal train --numerics native``
with the variant's variables set), since the libraries read them when they load.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
GOLDEN = ROOT / "tests" / "golden" / "numerics_logits.json"
RECIPE = {"epochs": 2, "batch_size": 64, "optimizer": {"name": "sgd", "lr": 0.1, "momentum": 0.9, "weight_decay": 5e-4},
          "lr_milestones": [], "reliability_epochs": []}
#: The golden runs: short, one of a matrix-product model and one of a convolution model.
RUNS = {
    "synthetic1d_mlp": {"dataset": {"name": "synthetic1d", "n_samples": 1200}, "model": {"name": "mlp", "hidden": 64},
                        "loss": {"name": "focal", "gamma": 3}, "recipe": RECIPE, "seed": 0, "device": "cpu"},
    "mnist1d_cnn1d": {"dataset": {"name": "mnist1d", "n_samples": 1000}, "model": {"name": "cnn1d"},
                      "loss": {"name": "cross_entropy"}, "recipe": RECIPE, "seed": 0, "device": "cpu"},
}
#: Changes to the pinned environment that were measured on AMD and Intel (bench/README.md).
VARIANTS = {
    "pinned": {},
    "mkl_avx2_strict": {"MKL_CBWR": "AVX2,STRICT"},
    "mkl_avx_strict": {"MKL_CBWR": "AVX,STRICT"},
    "mkl_sse42_strict": {"MKL_CBWR": "SSE4_2,STRICT"},
    "mkl_compatible": {"MKL_CBWR": "COMPATIBLE"},
    "mkl_avx2": {"MKL_CBWR": "AVX2"},
    "mkl_avx2_enable_avx2": {"MKL_CBWR": "AVX2,STRICT", "MKL_ENABLE_INSTRUCTIONS": "AVX2"},
    "mkl_compatible_sse42": {"MKL_CBWR": "COMPATIBLE", "MKL_ENABLE_INSTRUCTIONS": "SSE4_2"},
    "aten_default": {"ATEN_CPU_CAPABILITY": "default"},
    "aten_default+onednn_sse41": {"ATEN_CPU_CAPABILITY": "default", "ONEDNN_MAX_CPU_ISA": "SSE41"},
    "onednn_sse41": {"ONEDNN_MAX_CPU_ISA": "SSE41"},
    "mkl_avx2_strict+onednn_sse41": {"MKL_CBWR": "AVX2,STRICT", "ONEDNN_MAX_CPU_ISA": "SSE41"},
}


def variant_environment(variant: str) -> dict[str, str]:
    from focalcal.core.pinned_numerics import pinned_environment

    return {**pinned_environment(1), **VARIANTS[variant]}


def train_and_hash(name: str, workdir: Path, numerics: str = "pinned", environ: dict | None = None) -> dict:
    """Train run ``name`` in a fresh process; sha256 of its val and test logits' bytes, and what
    ``run.json`` recorded of the numerics and versions."""
    config = workdir / f"{name}.json"
    config.write_text(json.dumps(RUNS[name]))
    run_dir = workdir / name
    command = [sys.executable, "-m", "focalcal", "train", "--config", str(config), "--run-dir", str(run_dir),
               "--data-root", str(workdir / "data"), "--progress", "lines", "--numerics", numerics, "--threads", "1"]
    result = subprocess.run(command, capture_output=True, text=True, timeout=600,
                            env=dict(os.environ) if environ is None else environ, check=False)
    if result.returncode:
        raise RuntimeError(f"{name}: focalcal train failed:\n{result.stderr[-3000:]}")
    with np.load(run_dir / "logits.npz") as logits:
        hashes = {key: sha256(logits[key]) for key in ("val_logits", "test_logits")}
    info = json.loads((run_dir / "run.json").read_text())
    return {"logits_sha256": hashes, "numerics": info["numerics"], "versions": info["versions"]}


def sha256(array) -> str:
    return hashlib.sha256(np.ascontiguousarray(array).tobytes()).hexdigest()


def machine_class(numerics: dict) -> str:
    """What the golden file's ``verified_on`` names: the CPU vendor and its widest vector extension."""
    return f"{numerics['vendor']} {numerics['machine_isa']}"


def hash_variant(name: str, variant: str) -> dict:
    golden = json.loads(GOLDEN.read_text())
    environ = {**os.environ, **variant_environment(variant)}
    with tempfile.TemporaryDirectory() as directory:
        produced = train_and_hash(name, Path(directory), numerics="native", environ=environ)
    return {"run": name, "variant": variant, "machine": produced["numerics"]["machine"],
            "class": machine_class(produced["numerics"]), "env": VARIANTS[variant],
            "match_golden": produced["logits_sha256"] == golden["runs"][name],
            "logits_sha256": produced["logits_sha256"]}


def layer_hashes(name: str, data_root: Path) -> list[dict]:
    """One training batch of run ``name`` in this process: each module's output and the gradient
    of the loss with respect to it, hashed, in the order the forward pass reached them."""
    import torch

    from focalcal.training import RunConfig
    from focalcal.training.factories import build_loss, build_model, load_dataset

    config = RunConfig.from_dict(RUNS[name])
    torch.manual_seed(config.seed)
    dataset = load_dataset(config, data_root)
    model = build_model(config, dataset)
    loss_fn = build_loss(config, dataset)
    inputs, targets = dataset.train
    batch = torch.as_tensor(np.asarray(inputs[:64])), torch.as_tensor(np.asarray(targets[:64]))
    rows, handles = [], []

    def record(module_name):
        def hook(_module, _args, output):
            if isinstance(output, torch.Tensor):
                row = {"module": module_name or "model", "output": sha256(output.detach().numpy())}
                rows.append(row)
                if output.requires_grad:
                    output.register_hook(lambda grad: row.__setitem__("grad", sha256(grad.numpy())))
        return hook

    for module_name, module in model.named_modules():
        handles.append(module.register_forward_hook(record(module_name)))
    rows.insert(0, {"module": "inputs", "output": sha256(batch[0].numpy())})
    loss = loss_fn(model(batch[0]), batch[1])
    loss.backward()
    rows.append({"module": "loss", "output": sha256(loss.detach().numpy())})
    rows.extend({"module": f"param:{key}.grad", "output": sha256(p.grad.numpy())}
                for key, p in model.named_parameters())
    for handle in handles:
        handle.remove()
    return rows


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", nargs="+", choices=sorted(RUNS), default=sorted(RUNS))
    parser.add_argument("--variants", nargs="+", default=["pinned"],
                        help=f"'all' or some of {', '.join(VARIANTS)} (default: pinned)")
    parser.add_argument("--layers", action="store_true", help="one batch's per-module hashes (pinned) instead")
    parser.add_argument("--data-root", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.layers:
        if args.data_root is None:  # pin this process: restart with the pinned variables set
            with tempfile.TemporaryDirectory() as directory:
                return subprocess.run([sys.executable, "-m", "bench.numerics_hashes", "--layers", "--data-root",
                                       directory, "--runs", *args.runs], cwd=ROOT, check=False,
                                      env={**os.environ, **variant_environment("pinned")}).returncode
        import torch

        torch.set_num_threads(1)
        for name in args.runs:
            for row in layer_hashes(name, Path(args.data_root)):
                print(json.dumps({"run": name, **row}), flush=True)
        return 0
    variants = list(VARIANTS) if args.variants == ["all"] else args.variants
    unknown = sorted(set(variants) - set(VARIANTS))
    if unknown:
        parser.error(f"unknown variant(s) {unknown}; known: {', '.join(VARIANTS)}")
    for name in args.runs:
        for variant in variants:
            print(json.dumps(hash_variant(name, variant)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
