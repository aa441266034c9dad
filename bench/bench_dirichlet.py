"""Dirichlet calibration (ODIR, default penalties) above 20 classes: Newton-CG with
Hessian-vector products (the fitter) against scipy's L-BFGS-B with the analytic gradient (the
former fitter, ``fit_matrix_scaling_lbfgs``), on the same log-probabilities, one BLAS thread
each, in the same run. Printed: each one's time, the ratio, and the relative objective gap.
Goal: K = 100 × 5,000 samples in <= 30 s, at L-BFGS-B's optimum or below it (gap <= 1e-7).

``python -m bench dirichlet`` runs K = 40 × 2,000 side by side, then the fitter alone at
K = 100 × 5,000 (L-BFGS-B takes minutes there; pass ``--with-lbfgs-at-100`` to this module to
run it too).
"""

from __future__ import annotations

import sys
import time

import numpy as np
from scipy.special import log_softmax
from threadpoolctl import threadpool_limits

from focalcal.calibration import scaling
from focalcal.logits_file import stand_in_logits


def problem(n_samples: int, n_classes: int):
    arrays = stand_in_logits(n_samples, 10, n_classes, temperature=2.5, scale=4.0)
    features = log_softmax(arrays["val_logits"].astype(np.float64), axis=1)
    penalty = np.zeros((n_classes, n_classes + 1))
    penalty[:, :n_classes] = 1e-2 / (n_classes * (n_classes - 1))
    penalty[np.arange(n_classes), np.arange(n_classes)] = 0.0
    penalty[:, n_classes] = 1e-2 / n_classes
    return features, arrays["val_labels"], penalty


def timed(solver, features, labels, penalty):
    design = np.column_stack([features, np.ones(len(labels))])
    start = time.perf_counter()
    params, (converged, iterations, gradient) = solver(features, labels, penalty, 10000, 1e-10)
    seconds = time.perf_counter() - start
    value = scaling._matrix_scaling_objective(params, design, labels, penalty)[0]
    return seconds, value, converged, iterations, gradient


def compare(n_samples: int, n_classes: int, with_lbfgs: bool) -> None:
    features, labels, penalty = problem(n_samples, n_classes)
    print(f"\nK = {n_classes} x {n_samples:,} samples")
    runs = {"newton-cg": scaling.fit_matrix_scaling_newton_cg}
    if with_lbfgs:
        runs["l-bfgs-b"] = scaling.fit_matrix_scaling_lbfgs
    results = {name: timed(solver, features, labels, penalty) for name, solver in runs.items()}
    for name, (seconds, value, converged, iterations, gradient) in results.items():
        print(f"{name:10s} {seconds:8.2f} s  objective {value:.15f}  converged {converged}  "
              f"iterations {iterations}  largest gradient entry {gradient:.2e}")
    if with_lbfgs:
        (new_s, new_value, *_), (old_s, old_value, *_) = results["newton-cg"], results["l-bfgs-b"]
        print(f"l-bfgs-b / newton-cg time: {old_s / new_s:.1f}x; relative gap (newton-cg - l-bfgs-b) / l-bfgs-b: "
              f"{(new_value - old_value) / old_value:.2e}")


def main(quick: bool = False, lbfgs_at_100: bool = False) -> None:
    with threadpool_limits(limits=1, user_api="blas"):
        compare(1000 if quick else 2000, 20 if quick else 40, with_lbfgs=True)
        if not quick:
            compare(5000, 100, with_lbfgs=lbfgs_at_100)


if __name__ == "__main__":
    main(lbfgs_at_100="--with-lbfgs-at-100" in sys.argv)
