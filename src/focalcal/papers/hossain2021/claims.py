"""hossain2021's claims (§4 Tables 2-3, §5), tested on its segmentation studies.

The paired unit is a fold (the ``seed`` column of a cross-validated run). The minority
classes are every class but class 0: every segmentation set here has background as class
0 and it is the majority (the synthetic set copies the MRI set's 15:1 imbalance).
"""

from __future__ import annotations

from focalcal.claims.claim import Claim, NotTestable, compare_with_best, pair_series
from focalcal.claims.evidence import StudyEvidence
from focalcal.claims.verdict import Direction, Pairs
from focalcal.papers.hossain2021 import KEY as PAPER


def _loss(evidence: StudyEvidence, name: str) -> str | None:
    keys = evidence.loss_keys(lambda info: info.name == name and not info.smoothing)
    return keys[0] if keys else None


def _minority_iou(evidence: StudyEvidence, loss: str):
    rows = evidence.table[(evidence.table["loss"] == loss) & (evidence.table["metric"] == "iou")]
    rows = rows[~rows["class"].astype(str).isin(("0", "mean", "all"))]
    return rows.groupby(["dataset", "model", "recipe", "seed"])["value"].mean()


def _needs(evidence: StudyEvidence, *names: str) -> NotTestable | None:
    if not evidence.segmentation:
        return NotTestable("needs segmentation runs (IoU and Hausdorff distance)")
    missing = [name for name in names if _loss(evidence, name) is None]
    return NotTestable(f"needs runs of {', '.join(missing)}") if missing else None


def _minority(evidence: StudyEvidence) -> Pairs | NotTestable:
    lacking = _needs(evidence, "dual_focal", "cross_entropy")
    if lacking:
        return lacking
    pairs = Pairs()
    pair_series(pairs, _minority_iou(evidence, _loss(evidence, "dual_focal")),
                _minority_iou(evidence, _loss(evidence, "cross_entropy")), "DFL − CE")
    return pairs


def _hausdorff(evidence: StudyEvidence) -> Pairs | NotTestable:
    lacking = _needs(evidence, "dual_focal", "cross_entropy")
    if lacking:
        return lacking
    return _mean_class_diff(evidence, "hausdorff")


def _mean_class_diff(evidence: StudyEvidence, metric: str) -> Pairs:
    pairs = Pairs()
    dfl, ce = _loss(evidence, "dual_focal"), _loss(evidence, "cross_entropy")
    pair_series(pairs, evidence.values(dfl, metric, cls="mean"), evidence.values(ce, metric, cls="mean"), "DFL − CE")
    return pairs


def _best_iou(evidence: StudyEvidence) -> Pairs | NotTestable:
    lacking = _needs(evidence, "dual_focal")
    if lacking:
        return lacking
    dfl = _loss(evidence, "dual_focal")
    others = [key for key in evidence.loss_keys(lambda info: True) if key != dfl]
    if not others:
        return NotTestable("needs other losses beside DFL")
    return compare_with_best(evidence, dfl, others, "iou", None, cls="mean", best=max)


CLAIMS = [
    Claim("h21-minority-iou", PAPER,
          "Dual focal loss improves the segmentation of the minority classes over cross-entropy: a higher IoU on "
          "them.",
          "Abstract; §4, Tables 2-3, Figs 3-6", "IoU of the minority classes (all but background): DFL − CE, per fold",
          Direction.AT_LEAST, _minority),
    Claim("h21-hausdorff", PAPER,
          "DFL gives a lower Hausdorff distance than cross-entropy.",
          "§4, Tables 2-3", "mean Hausdorff distance over classes: DFL − CE, per fold",
          Direction.AT_MOST, _hausdorff),
    Claim("h21-dfl-best-iou", PAPER,
          "DFL outperforms the other five loss functions (CE, WCE, DCE, FL, GDL) in mean IoU.",
          "§4, Table 2 text", "mean IoU: DFL − the best other loss, per fold",
          Direction.AT_LEAST, _best_iou),
]
