"""Dirichlet calibration (ODIR, default penalties λ_od = λ_b = 1e-2, tol 1e-10) at K = 100 ×
5,000 samples on five inputs, one BLAS thread: the fitter (``fit_matrix_scaling_newton_cg``)
against its baseline (:data:`BASELINE`: Newton-CG from the identity on the penalised objective
as it stands, CG preconditioned by the Hessian's diagonal), both in the same run, the fitter
twice (the faster run printed: the machine is shared), the baseline once, and each answer's
objective against a tight reference solve computed once per input: scipy's ``trust-krylov``
with the exact Hessian-vector product, to a gradient norm of 1e-12 (at most 100 iterations),
started from the baseline's answer (with ``--no-baseline``, from the fitter's): the objective
is convex, so what it still gains there bounds the answer's gap. Goals: every input in <= 10 s
at the reference optimum (relative gap <= 1e-9), none more than 3× slower than the fastest.

The inputs (``inputs(n, k)``; the tests fit them at small K):

- ``stand_in``: the stand-in model of ``focalcal.logits_file.stand_in_logits`` (temperature
  2.5, scale 4).
- ``overconfident``: labels uniform, logits N(0, 1) with +2.5 on the label, all × 2.2.
- ``underconfident``: the same logits × 0.3.
- ``focal``: a focal-loss-trained model. The default run's classifiers have at most 10 classes
  (synthetic 1-D: 3, digits and MNIST-1D: 10), so this trains the default run's MLP
  (``focalcal.models`` ``mlp``, hidden 64) with the library's ``FocalLoss(gamma=3)`` — the
  default run's ``focal3`` — on a K-class Gaussian mixture in 16 dimensions (20,000 training
  points, 30 epochs of Adam) and takes its logits on 5,000 held-out points.
- ``near_separable``: logits N(0, 1) with +7 on the label (top-1 accuracy ~99.9 %), 1 % of the
  labels redrawn uniformly, so that the optimum is finite but the unpenalised diagonal large.

``python -m bench dirichlet`` prints the per-input table at K = 100 (time, Newton steps, Hessian-vector
products, block preconditioners built), then the fitter's time
against K (10, 40, 100, 200; the ``overconfident`` input, 5,000 samples).
``--quick``: K = 30 × 2,000, no K sweep. ``python -m bench.bench_dirichlet --no-baseline`` leaves
the baseline out (up to ~10× the fitter's time, ``bench/README.md``). ``--seeds 0,1,2`` draws the
five inputs with each seed in turn (default: seed 0), a table each: the goals hold for the kinds of
input, not for one draw of them.
"""

from __future__ import annotations

import sys
import time

import numpy as np
from scipy.special import log_softmax
from threadpoolctl import threadpool_limits

from focalcal.calibration import scaling
from focalcal.logits_file import stand_in_logits

INPUTS = ("stand_in", "overconfident", "underconfident", "focal", "near_separable")


def odir_penalty(n_classes: int, off_diagonal_l2: float = 1e-2, bias_l2: float = 1e-2) -> np.ndarray:
    """The (K, K + 1) penalty weights ``DirichletCalibration`` passes to the fitter."""
    penalty = np.zeros((n_classes, n_classes + 1))
    penalty[:, :n_classes] = off_diagonal_l2 / (n_classes * (n_classes - 1))
    penalty[np.arange(n_classes), np.arange(n_classes)] = 0.0
    penalty[:, n_classes] = bias_l2 / n_classes
    return penalty


def _focal_model_logits(n_samples: int, n_classes: int, seed: int, train_size: int = 20000,
                        ) -> tuple[np.ndarray, np.ndarray]:
    import torch

    from focalcal.losses import FocalLoss
    from focalcal.models.registry import mlp

    rng = np.random.default_rng(seed)
    dims, n_train = 16, train_size
    means = rng.normal(0, 0.7, (n_classes, dims))
    labels = rng.integers(0, n_classes, n_train + n_samples)
    points = (means[labels] + rng.normal(size=(n_train + n_samples, dims))).astype(np.float32)
    torch.manual_seed(seed)
    model = mlp(n_classes, in_features=dims, hidden=64)
    loss = FocalLoss(gamma=3.0)
    optimiser = torch.optim.Adam(model.parameters(), lr=3e-3)
    x_train, y_train = torch.from_numpy(points[:n_train]), torch.from_numpy(labels[:n_train])
    generator = torch.Generator().manual_seed(seed)
    with torch.inference_mode(False):
        for _ in range(30):
            for batch in torch.randperm(n_train, generator=generator).split(256):
                optimiser.zero_grad()
                loss(model(x_train[batch]), y_train[batch]).backward()
                optimiser.step()
    with torch.no_grad():
        logits = model(torch.from_numpy(points[n_train:])).numpy()
    return logits.astype(np.float32), labels[n_train:]


def input_logits(name: str, n_samples: int, n_classes: int, seed: int = 0, train_size: int = 20000,
                 ) -> tuple[np.ndarray, np.ndarray]:
    """Float32 logits (n_samples, n_classes) and int64 labels of one of :data:`INPUTS` (``train_size``:
    the focal-loss model's training points)."""
    if name == "stand_in":
        arrays = stand_in_logits(n_samples, 10, n_classes, temperature=2.5, scale=4.0, seed=seed)
        return arrays["val_logits"], arrays["val_labels"]
    if name == "focal":
        return _focal_model_logits(n_samples, n_classes, seed, train_size)
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, n_classes, n_samples)
    logits = rng.normal(0, 1, (n_samples, n_classes))
    if name == "near_separable":
        logits[np.arange(n_samples), labels] += 7.0
        noisy = rng.uniform(size=n_samples) < 0.01
        labels[noisy] = rng.integers(0, n_classes, int(noisy.sum()))
    else:
        logits[np.arange(n_samples), labels] += 2.5
        logits *= {"overconfident": 2.2, "underconfident": 2.2 * 0.3}[name]
    return logits.astype(np.float32), labels.astype(np.int64)


def inputs(n_samples: int, n_classes: int, seed: int = 0) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Each input's float64 log-probabilities (the fitter's features) and labels, by name."""
    return {name: (log_softmax(logits.astype(np.float64), axis=1), labels)
            for name, (logits, labels) in ((name, input_logits(name, n_samples, n_classes, seed)) for name in INPUTS)}


def objective(params: np.ndarray, features: np.ndarray, labels: np.ndarray, penalty: np.ndarray) -> float:
    design = np.column_stack([features, np.ones(len(labels))])
    return float(scaling._matrix_scaling_objective(params, design, labels, penalty)[0])


def reference_solve(features: np.ndarray, labels: np.ndarray, penalty: np.ndarray, start=None, gtol: float = 1e-12):
    """(params, objective) of scipy's trust-krylov from ``start`` (default: the identity) to a gradient
    norm of ``gtol`` (at most 100 iterations): the lower objective of its start and its end."""
    from scipy.optimize import minimize

    n, k = features.shape
    design = np.column_stack([features, np.ones(n)])
    one_hot = np.eye(k)[labels]
    state = {}

    def probabilities(flat):
        if state.get("key") is None or not np.array_equal(state["key"], flat):
            logits = design @ flat.reshape(k, k + 1).T
            state["key"], state["log_probs"] = flat.copy(), log_softmax(logits, axis=1)
        return state["log_probs"]

    def value(flat):
        log_probs = probabilities(flat)
        return -log_probs[np.arange(n), labels].mean() + float((penalty.ravel() * flat**2).sum())

    def gradient(flat):
        probs = np.exp(probabilities(flat))
        return ((probs - one_hot).T @ design / n).ravel() + 2 * penalty.ravel() * flat

    def hessp(flat, vector):
        probs = np.exp(probabilities(flat))
        change = design @ vector.reshape(k, k + 1).T
        weighted = probs * (change - (probs * change).sum(axis=1, keepdims=True))
        return (weighted.T @ design / n).ravel() + 2 * penalty.ravel() * vector

    start = np.column_stack([np.eye(k), np.zeros(k)]) if start is None else start
    result = minimize(value, start.ravel(), jac=gradient, hessp=hessp, method="trust-krylov",
                      options={"gtol": gtol, "maxiter": 100})
    params = result.x.reshape(k, k + 1)
    if not objective(params, features, labels, penalty) <= objective(start, features, labels, penalty):
        params = start  # trust-krylov's subproblem can break down (NaN) at a start already optimal
    return params, objective(params, features, labels, penalty)


#: The fitter's settings before this benchmark's inputs were added: from the identity, CG
#: preconditioned by the Hessian's diagonal, on the penalised objective as it stands.
BASELINE = {"warm_start": False, "preconditioner": "diagonal", "optimal_shift": False}


def timed_fit(features, labels, penalty, repeats: int = 2, counts: dict | None = None, **options):
    """The fitter's fastest time of ``repeats`` runs, its Newton steps and Hessian-vector products, its answer.

    ``counts``, if given, receives the last run's ``builds``: block preconditioners built.
    """
    products, builds = [0], [0]
    original, original_blocks = scaling._preconditioned_cg, scaling._class_blocks

    def counting(hessian_times, *args, **kwargs):
        def counted(direction):
            products[0] += 1
            return hessian_times(direction)
        return original(counted, *args, **kwargs)

    def counting_blocks(*args):
        builds[0] += 1
        return original_blocks(*args)

    seconds = []
    scaling._preconditioned_cg, scaling._class_blocks = counting, counting_blocks
    try:
        for _ in range(repeats):
            products[0] = builds[0] = 0
            start = time.perf_counter()
            params, (converged, steps, _) = scaling.fit_matrix_scaling_newton_cg(features, labels, penalty, 10000,
                                                                                  1e-10, **options)
            seconds.append(time.perf_counter() - start)
    finally:
        scaling._preconditioned_cg, scaling._class_blocks = original, original_blocks
    if not converged:
        raise RuntimeError(f"the fit did not converge in 10,000 steps ({options})")
    if counts is not None:
        counts["builds"] = builds[0]
    return min(seconds), steps, products[0], params


def per_input_table(n_samples: int, n_classes: int, baseline: bool, seed: int = 0) -> None:
    penalty = odir_penalty(n_classes)
    print(f"\nK = {n_classes} x {n_samples:,} samples, inputs drawn with seed {seed}, one BLAS thread; times: the "
          f"faster of two runs (the baseline: one run); gap: (objective - reference) / reference")
    print(f"{'input':15s} {'reference (polish)':>26s} {'baseline':>36s} {'fitter (pc: preconditioners built)':>42s} "
          f"{'ratio':>7s}")
    rows = {}
    for name, (features, labels) in inputs(n_samples, n_classes, seed).items():
        counts = {}
        seconds, steps, products, params = timed_fit(features, labels, penalty, counts=counts)
        if baseline:
            base_seconds, base_steps, base_products, base_params = timed_fit(features, labels, penalty, repeats=1,
                                                                             **BASELINE)
        start = time.perf_counter()
        _, reference = reference_solve(features, labels, penalty, base_params if baseline else params)
        reference_seconds = time.perf_counter() - start
        gap = (objective(params, features, labels, penalty) - reference) / reference
        base = ""
        if baseline:
            base_gap = (objective(base_params, features, labels, penalty) - reference) / reference
            base = f"{base_seconds:6.2f} s {base_steps:3d} st {base_products:4d} Hv gap {base_gap:8.1e}"
        rows[name] = seconds
        print(f"{name:15s} {reference_seconds:8.2f} s obj {reference:.6g}   {base:>26s} "
              f"{seconds:6.2f} s {steps:3d} st {products:4d} Hv {counts['builds']:2d} pc gap {gap:8.1e} "
              f"{base_seconds / seconds if baseline else float('nan'):6.1f}x", flush=True)
        if abs(gap) > 1e-9:
            print(f"  ! {name}: the fitter's objective is {gap:.1e} (relative) from the reference")
    print(f"slowest / fastest input: {max(rows.values()) / min(rows.values()):.2f}x")


def cost_of_k(n_samples: int, classes=(10, 40, 100, 200), names=("overconfident",)) -> None:
    print(f"\nThe fitter's time against K ({n_samples:,} samples, one BLAS thread, the faster of two runs)")
    for n_classes in classes:
        penalty = odir_penalty(n_classes)
        cells = []
        for name in names:
            logits, labels = input_logits(name, n_samples, n_classes)
            features = log_softmax(logits.astype(np.float64), axis=1)
            seconds, steps, products, _ = timed_fit(features, labels, penalty)
            cells.append(f"{name} {seconds:6.2f} s ({steps} steps, {products} Hv)")
        print(f"K = {n_classes:3d}: " + "; ".join(cells), flush=True)


def main(quick: bool = False, baseline: bool = True, seeds: tuple[int, ...] = (0,)) -> None:
    with threadpool_limits(limits=1, user_api="blas"):
        for seed in seeds:
            per_input_table(2000 if quick else 5000, 30 if quick else 100, baseline, seed)
        if not quick:
            cost_of_k(5000)


def _seeds(argv: list[str]) -> tuple[int, ...]:
    """The ``--seeds 0,1,2`` of the command line (default: seed 0 alone)."""
    if "--seeds" not in argv:
        return (0,)
    given = argv[argv.index("--seeds") + 1:argv.index("--seeds") + 2]
    if not given or not all(part.isdigit() for part in given[0].split(",")):
        raise SystemExit("--seeds takes a comma-separated list of non-negative integers, e.g. --seeds 0,1,2")
    return tuple(int(part) for part in given[0].split(","))


if __name__ == "__main__":
    main(quick="--quick" in sys.argv, baseline="--no-baseline" not in sys.argv, seeds=_seeds(sys.argv))
