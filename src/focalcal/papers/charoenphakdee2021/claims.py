"""charoenphakdee2021's claims (§5.2 Fig 3; §6.1–6.2 Figs 4–6), tested on its studies.

ECE here is the paper's: 10 equal-width bins (§6 "we used 10 as the number of bins"), on
the study's first bin count when 10 is absent. "Confidence gap" is mean confidence minus
accuracy on the test set: below 0 means underconfident.
"""

from __future__ import annotations

from itertools import pairwise

from focalcal.claims.claim import Claim, NotTestable, compare_calibrators, ladder, trend
from focalcal.claims.evidence import StudyEvidence
from focalcal.claims.verdict import Direction, Pairs
from focalcal.papers.charoenphakdee2021 import KEY as PAPER

SVHN_LIKE = ("SVHN",)  # §6.2: Ψ^γ "is still effective in SVHN regardless of the model size"


def _bins(evidence: StudyEvidence):
    bins = sorted(evidence.table["bins"].dropna().unique())
    return 10 if 10 in bins else (bins[0] if bins else None)


def _standard(info) -> bool:
    return info.name in ("focal", "cross_entropy") and info.gamma is not None and not info.smoothing


def _smoothed(info) -> bool:
    return info.name == "focal" and info.gamma is not None and info.smoothing > 0


def _posterior_datasets(evidence: StudyEvidence) -> set[str]:
    return set(evidence.table.loc[evidence.table["metric"] == "kl_posterior", "dataset"])


def _gap(evidence: StudyEvidence, loss: str, calibrator: str, datasets=None):
    return evidence.values(loss, "confidence_gap", calibrator, datasets=datasets)


def _underconfident(evidence: StudyEvidence) -> Pairs | NotTestable:
    raw = evidence.calibrator("raw")
    datasets = _posterior_datasets(evidence) | evidence.datasets_standing_for(*SVHN_LIKE)
    focal = [key for key in evidence.loss_keys(_standard) if evidence.losses[key].gamma > 0]
    if raw is None or not focal or not datasets:
        return NotTestable("needs uncalibrated focal-loss runs (γ > 0, Standard) on a data set with a known posterior "
                           "or on SVHN (or its stand-in, digits)")
    pairs = Pairs()
    for loss in focal:
        for unit, gap in _gap(evidence, loss, raw, datasets).items():
            pairs.add(float(gap), unit, loss)
    return pairs


def _underconfidence_grows(evidence: StudyEvidence) -> Pairs | NotTestable:
    raw = evidence.calibrator("raw")
    steps = ladder(evidence, _standard)
    if raw is None or len(steps) < 2:
        return NotTestable("needs uncalibrated runs at two or more γ (Standard training)")
    pairs = Pairs()
    gaps = [(gamma, loss, _gap(evidence, loss, raw)) for gamma, loss in steps]
    for (g0, l0, low), (g1, l1, high) in pairwise(gaps):
        for unit in low.index.intersection(high.index):
            pairs.add(float(high[unit] - low[unit]), unit, f"γ {g1:g} − γ {g0:g}")
    return pairs


def _psi_vs_raw(accept, datasets_for=None):
    def test(evidence: StudyEvidence) -> Pairs | NotTestable:
        raw, psi = evidence.calibrator("raw"), evidence.calibrator("psi")
        losses = [key for key in evidence.loss_keys(accept) if evidence.losses[key].gamma > 0]
        datasets = evidence.datasets_standing_for(*datasets_for) if datasets_for else None
        if raw is None or psi is None or not losses or datasets == set():
            where = f" on {' or '.join(datasets_for)} (or a stand-in)" if datasets_for else ""
            return NotTestable(f"needs focal-loss runs (γ > 0) with uncalibrated and Ψ^γ calibrators{where}")
        return compare_calibrators(evidence, losses, psi, raw, "ece", bins=_bins(evidence), datasets=datasets)
    return test


def _ts_focal(second: str, first: str):
    def test(evidence: StudyEvidence) -> Pairs | NotTestable:
        a, b = evidence.calibrator(second), evidence.calibrator(first)
        losses = [key for key in evidence.loss_keys(_standard) if evidence.losses[key].gamma > 0]
        if a is None or b is None or not losses:
            return NotTestable(f"needs focal-loss runs (γ > 0) with both {second} and {first} calibrators")
        return compare_calibrators(evidence, losses, a, b, "ece", bins=_bins(evidence))
    return test


def _ls_raw_grows(evidence: StudyEvidence) -> Pairs | NotTestable:
    raw = evidence.calibrator("raw")
    steps = ladder(evidence, _smoothed)
    if raw is None or len(steps) < 2:
        return NotTestable("needs label-smoothed focal runs at two or more γ with an uncalibrated calibrator")
    return trend(evidence, steps, "ece", raw, bins=_bins(evidence))


def _kld(first: str, second: str):
    def test(evidence: StudyEvidence) -> Pairs | NotTestable:
        a, b = evidence.calibrator(first), evidence.calibrator(second)
        datasets = _posterior_datasets(evidence)
        losses = [key for key in evidence.loss_keys(_standard) if evidence.losses[key].gamma > 0]
        if not datasets or a is None or b is None or not losses:
            return NotTestable(f"needs focal-loss runs (γ > 0) on a data set with a known posterior (synthetic1d) "
                               f"and both {first} and {second} calibrators")
        return compare_calibrators(evidence, losses, a, b, "kl_posterior", datasets=datasets)
    return test


CLAIMS = [
    Claim("c21-fl-underconfident", PAPER,
          "Training with the focal loss (γ > 0) gives η-underconfident scores: the maximum predicted score is below "
          "the true class posterior, seen as mean confidence below accuracy (on SVHN, 'apart from Standard in CIFAR10').",
          "§5.2 Fig 3d-e; §6.1 Fig 4; Cor. 9",
          "confidence gap (mean confidence − accuracy), uncalibrated FL γ > 0, on the known-posterior and SVHN-like data",
          Direction.BELOW, _underconfident),
    Claim("c21-underconfidence-grows", PAPER,
          "The focal loss is more underconfident as γ increases.",
          "§5.2 Fig 3 ('with a larger γ … more significantly'); §6.1",
          "confidence gap at the next γ − at this γ (uncalibrated, Standard), within a unit",
          Direction.BELOW, _underconfidence_grows),
    Claim("c21-psi-standard-svhn", PAPER,
          "Under Standard training on SVHN, Ψ^γ lowers the ECE of focal-loss models (γ > 0) whatever the model size.",
          "§6.1-6.2, Fig 5a-b",
          "ECE: Ψ^γ − uncalibrated, FL γ > 0, Standard, SVHN (stand-in: digits)",
          Direction.BELOW, _psi_vs_raw(_standard, SVHN_LIKE)),
    Claim("c21-tsfl-degrades", PAPER,
          "Temperature scaling with the focal loss as validation objective (TS_FL) without Ψ^γ makes ECE worse "
          "than that of Standard.",
          "§6.1, Fig 4 (TS_FL row)",
          "ECE: TS_FL − uncalibrated, FL γ > 0",
          Direction.ABOVE, _ts_focal("ts_focal", "raw")),
    Claim("c21-tsfl-psi", PAPER,
          "Applying Ψ^γ after TS_FL lowers ECE: a larger γ leads to worse ECE under TS_FL and Ψ^γ mitigates this.",
          "§6.1-6.2, Fig 6",
          "ECE: TS_FL + Ψ^γ − TS_FL, FL γ > 0",
          Direction.BELOW, _ts_focal("ts_focal_psi", "ts_focal")),
    Claim("c21-ls-raw-grows", PAPER,
          "With label smoothing (LS, 0.1), ECE-raw increases as γ increases.",
          "§6.1, Fig 4c; Fig 6 (LS)",
          "ECE at the next γ − at this γ, uncalibrated, focal + LS, within a unit",
          Direction.ABOVE, _ls_raw_grows),
    Claim("c21-ls-psi", PAPER,
          "With label smoothing, using the transformation Ψ^γ is preferable: it lowers ECE for γ > 0.",
          "§6.2, Fig 6 (LS)",
          "ECE: Ψ^γ − uncalibrated, focal + LS, γ > 0",
          Direction.BELOW, _psi_vs_raw(_smoothed)),
    Claim("c21-psi-recovers-posterior", PAPER,
          "On synthetic data with a known posterior, Ψ^γ recovers the class posterior from a focal-loss model: "
          "its KL divergence to the true posterior is lower than that of the raw scores.",
          "§5.2, Fig 3h-i vs 3d-e",
          "KL(η ‖ q): Ψ^γ − uncalibrated, FL γ > 0",
          Direction.BELOW, _kld("psi", "raw")),
    Claim("c21-tsnll-misses-posterior", PAPER,
          "Temperature scaling by NLL moves focal-loss scores closer to the posterior but a large gap remains: "
          "its KL divergence stays above that of Ψ^γ.",
          "§5.2, Fig 3f-g vs 3h-i",
          "KL(η ‖ q): TS_NLL − Ψ^γ, FL γ > 0",
          Direction.ABOVE, _kld("ts_nll", "psi")),
]
