"""komisarenko2024's claims (§5 Table 1 and Fig 8), tested on its studies.

ECE is the paper's: 15 equal-mass bins (our ``adaece``). "TS" is the plain temperature
scaling the paper compares with (the study's γ_ev = 0 grid, or TS by val ECE); "focal TS"
is chosen by val ECE, as in the paper's ECE column and Fig 8.
"""

from __future__ import annotations

import numpy as np

from focalcal.claims.claim import Claim, NotTestable, compare_calibrators, ladder, trend
from focalcal.claims.evidence import StudyEvidence
from focalcal.claims.verdict import Direction, Pairs
from focalcal.papers.komisarenko2024 import KEY as PAPER

BINS = 15


def _ts(evidence):
    return evidence.calibrator("ts_grid_ece", "ts_ece")


def _fts(evidence):
    return evidence.calibrator("fts_ece")


def _all_losses(evidence):
    return evidence.loss_keys(lambda info: True)


def _fts_not_worse(evidence: StudyEvidence) -> Pairs | NotTestable:
    ts, fts = _ts(evidence), _fts(evidence)
    if ts is None or fts is None:
        return NotTestable("needs plain TS and focal TS, both chosen by val ECE")
    return compare_calibrators(evidence, _all_losses(evidence), fts, ts, "adaece", bins=BINS)


def _temperature_falls(evidence: StudyEvidence) -> Pairs | NotTestable:
    ts = _ts(evidence)
    steps = ladder(evidence, lambda info: info.name in ("cross_entropy", "focal") and not info.smoothing)
    if ts is None or len(steps) < 2:
        return NotTestable("needs plain TS on cross-entropy/focal runs at two or more γ_train")
    return trend(evidence, steps, "temperature", ts)


def _temperature_rises_with_gamma_ev(evidence: StudyEvidence) -> Pairs | NotTestable:
    fts = _fts(evidence)
    if fts is None or evidence.calibration is None:
        return NotTestable("needs focal TS chosen by val ECE, with its fitted grid")
    pairs = Pairs()
    for loss in _all_losses(evidence):
        for unit, path in evidence.runs(loss):
            fitted = evidence.calibration(path)[fts]["fitted"]["fitted"]
            gammas = np.asarray(fitted["gammas_"], dtype=float)
            temperatures = np.asarray(fitted["best_temperature_per_gamma_"], dtype=float)
            order = np.argsort(gammas)
            gammas, temperatures = gammas[order], temperatures[order]
            for i in range(len(gammas) - 1):
                pairs.add(float(temperatures[i + 1] - temperatures[i]), unit,
                          f"{loss}, T at γ_ev {gammas[i + 1]:g} − at {gammas[i]:g}")
    if not len(pairs):
        return NotTestable("focal TS was fitted over a single γ_ev")
    return pairs


CLAIMS = [
    Claim("k24-fts-ece", PAPER,
          "Focal temperature scaling (γ_ev and T chosen by val ECE) improves ECE over standard temperature scaling "
          "for every trained model.",
          "§5, Table 1", "ECE (15 equal-mass bins): focal TS − TS, both chosen by val ECE",
          Direction.AT_MOST, _fts_not_worse),
    Claim("k24-temperature-falls", PAPER,
          "The optimal temperature generally decreases with the growth of the focal training parameter γ_tr.",
          "§5, Table 1 (T of TS)", "optimal T of TS at the next γ_tr − at this γ_tr (CE = 0), within a unit",
          Direction.BELOW, _temperature_falls),
    Claim("k24-temperature-rises-with-gamma-ev", PAPER,
          "For a fixed trained model, the optimal temperature grows (close to linearly) with the focal calibration "
          "parameter γ_ev.",
          "§5, Fig 8", "best T of focal TS at the next γ_ev − at this γ_ev, per run",
          Direction.ABOVE, _temperature_rises_with_gamma_ev),
]
