"""Claims as data: verdicts on small study tables whose answers are known."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from focalcal.claims import (
    CLAIMS,
    FAILS,
    HOLDS,
    INCONCLUSIVE,
    NOT_TESTABLE,
    Direction,
    NotTestable,
    Pairs,
    claims_table,
    evaluate_claim,
    judge,
    scoreboard,
)
from focalcal.claims.evidence import StudyEvidence
from focalcal.claims.verdict import decide, t_interval
from focalcal.core.spec_facts import loss_info

ROOT = Path(__file__).resolve().parents[1]
LOSSES = {"ce": {"name": "cross_entropy"}, "focal1": {"name": "focal", "gamma": 1},
          "focal3": {"name": "focal", "gamma": 3}, "flsd53": {"name": "flsd53"}, "brier": {"name": "brier"},
          "focal1_ls": {"name": "focal", "gamma": 1, "smoothing": 0.1},
          "focal3_ls": {"name": "focal", "gamma": 3, "smoothing": 0.1},
          "dfl": {"name": "dual_focal"}, "gdl": {"name": "generalized_dice"}}
ROLES = {"raw": "raw", "ts_ece": "ts_ece", "psi": "psi", "ts_focal": "ts_focal", "ts_focal_psi": "ts_focal_psi",
         "ts_grid": "ts_grid_ece", "fts": "fts_ece", "ts_nll": "ts_nll"}


def claim(key):
    return next(c for claims in CLAIMS.values() for c in claims if c.key == key)


def table(values: dict, seeds=(0, 1, 2, 3), dataset="mnist1d", status=None) -> pd.DataFrame:
    """values: (loss, method, metric, bins) -> callable(seed) or number."""
    rows = []
    for (loss, method, metric, bins), value in values.items():
        for seed in seeds:
            v = value(seed) if callable(value) else value
            rows.append({"study": "s", "paper": "p", "mirrors": "", "dataset": dataset, "model": "cnn", "loss": loss,
                         "recipe": "r", "seed": seed, "status": (status or {}).get((loss, seed), "trained"),
                         "calibrator": method, "metric": metric, "bins": bins, "value": v})
    return pd.DataFrame(rows)


def evidence(frame, paper="mukhoti2020", datasets=None, **kwargs) -> StudyEvidence:
    return StudyEvidence("s", paper, frame, {k: loss_info(v) for k, v in LOSSES.items()}, ROLES,
                         datasets or {"mnist1d": "CIFAR-10", "digits": "SVHN", "synthetic1d": None}, **kwargs)


# ------------------------------------------------------------------------------ verdicts


def test_t_interval_matches_the_closed_form():
    d = np.array([-0.03, -0.01, -0.02, -0.04])
    mean, low, high = t_interval(d)
    half = 3.182446305284263 * d.std(ddof=1) / 2  # t_{0.975, 3}
    assert mean == pytest.approx(-0.025)
    assert (low, high) == pytest.approx((mean - half, mean + half), rel=1e-9)
    assert (low, high) == pytest.approx(stats.t.interval(0.95, 3, loc=d.mean(), scale=stats.sem(d)), rel=1e-9)


@pytest.mark.parametrize("low, high, direction, expected", [
    (-0.3, -0.1, Direction.BELOW, HOLDS), (0.1, 0.3, Direction.BELOW, FAILS), (-0.1, 0.1, Direction.BELOW, INCONCLUSIVE),
    (0.0, 0.0, Direction.BELOW, FAILS), (0.0, 0.0, Direction.AT_MOST, HOLDS), (-0.1, 0.0, Direction.AT_MOST, HOLDS),
    (0.1, 0.3, Direction.ABOVE, HOLDS), (-0.3, -0.1, Direction.ABOVE, FAILS), (0.0, 0.0, Direction.AT_LEAST, HOLDS),
    (-0.2, 0.1, Direction.AT_LEAST, INCONCLUSIVE)])
def test_decide(low, high, direction, expected):
    assert decide(low, high, direction) == expected


def test_threshold_moves_the_line():
    assert decide(0.002, 0.008, Direction.BELOW, threshold=0.01) == HOLDS
    assert decide(0.011, 0.02, Direction.BELOW, threshold=0.01) == FAILS
    assert decide(0.005, 0.015, Direction.BELOW, threshold=0.01) == INCONCLUSIVE


def test_fewer_than_three_pairs_is_inconclusive_and_says_so():
    pairs = Pairs([-1.0, -2.0], [("d", "m", "r", 0), ("d", "m", "r", 1)], ["a", "b"])
    outcome = judge(pairs, Direction.BELOW)
    assert outcome.verdict == INCONCLUSIVE and "only 2 pair" in outcome.reason and outcome.mean == -1.5
    assert judge(NotTestable("no FL-3"), Direction.BELOW).verdict == NOT_TESTABLE


def test_a_non_finite_difference_is_refused():
    with pytest.raises(ValueError, match="non-finite"):
        Pairs().add(math.nan, ("d", "m", "r", 0), "u")


# ------------------------------------------------------------------ mukhoti2020 on tables


def ece_table(ce, fl3, seeds=(0, 1, 2, 3), status=None):
    return table({("ce", "raw", "ece", 15): ce, ("focal3", "raw", "ece", 15): fl3}, seeds=seeds, status=status)


def test_claim_that_holds():
    frame = ece_table(lambda s: 0.10 + 0.01 * s, lambda s: 0.03 + 0.012 * s)
    outcome = evaluate_claim(claim("m20-fl3-ece-pre"), evidence(frame))
    assert outcome.verdict == HOLDS and outcome.n_pairs == 4
    assert outcome.mean == pytest.approx(np.mean([0.03 + 0.012 * s - 0.10 - 0.01 * s for s in range(4)]))
    assert outcome.high < 0


def test_claim_that_fails():
    frame = ece_table(lambda s: 0.01 + 0.001 * s, lambda s: 0.11 + 0.002 * s)
    assert evaluate_claim(claim("m20-fl3-ece-pre"), evidence(frame)).verdict == FAILS


def test_claim_that_is_inconclusive():
    frame = ece_table(0.05, lambda s: 0.05 + (0.02 if s % 2 else -0.02))
    outcome = evaluate_claim(claim("m20-fl3-ece-pre"), evidence(frame))
    assert outcome.verdict == INCONCLUSIVE and outcome.low < 0 < outcome.high and "contains 0" in outcome.reason


def test_claim_not_testable_names_what_is_missing():
    frame = table({("ce", "raw", "ece", 15): 0.1, ("brier", "raw", "ece", 15): 0.05})
    outcome = evaluate_claim(claim("m20-fl3-ece-pre"), evidence(frame))
    assert outcome.verdict == NOT_TESTABLE and "candidate" in outcome.reason
    no_ts = evaluate_claim(claim("m20-s99-after-ts"), evidence(frame))
    assert no_ts.verdict == NOT_TESTABLE and "temperature scaling" in no_ts.reason


def test_unhealthy_runs_are_left_out_and_listed():
    frame = ece_table(lambda s: 0.10 + 0.01 * s, lambda s: 0.03 + 0.012 * s, status={("ce", 1): "collapsed"})
    ev = evidence(frame)
    outcome = evaluate_claim(claim("m20-fl3-ece-pre"), ev)
    assert outcome.n_pairs == 3 and not any(unit[3] == 1 for unit in outcome.pairs.units)
    assert "mnist1d/cnn/ce/r/seed1 (collapsed: test accuracy (segmentation: mean IoU) within 2 points of chance" \
        in ev.exclusion_note()
    row = claims_table([ev]).set_index("claim").loc["m20-fl3-ece-pre"]
    assert "collapsed" in row["excluded_runs"] and row["verdict"] == HOLDS


def test_on_par_uses_the_margin():
    frame = table({("ce", "raw", "error", None): 0.20, ("focal3", "raw", "error", None): lambda s: 0.203 + 0.001 * s,
                   ("flsd53", "raw", "error", None): lambda s: 0.202 - 0.001 * s})
    outcome = evaluate_claim(claim("m20-error-on-par"), evidence(frame))
    assert outcome.verdict == HOLDS and outcome.n_pairs == 8 and outcome.mean > 0  # worse, but within 1 point
    worse = table({("ce", "raw", "error", None): 0.20, ("focal3", "raw", "error", None): lambda s: 0.25 + 0.001 * s})
    assert evaluate_claim(claim("m20-error-on-par"), evidence(worse)).verdict == FAILS


def test_flsd53_against_the_lowest_baseline():
    frame = table({("ce", "ts_ece", "ece", 15): 0.03, ("brier", "ts_ece", "ece", 15): lambda s: 0.02 + 0.001 * s,
                   ("flsd53", "ts_ece", "ece", 15): lambda s: 0.01 + 0.0005 * s})
    outcome = evaluate_claim(claim("m20-flsd53-lowest-post"), evidence(frame))
    expected = [0.01 + 0.0005 * s - (0.02 + 0.001 * s) for s in range(4)]
    assert outcome.verdict == HOLDS and outcome.mean == pytest.approx(np.mean(expected))


def history(test_nll, train_nll, lr=None, weight_norm=None):
    n = len(test_nll)
    return pd.DataFrame({"epoch": np.arange(1, n + 1), "lr": lr or [0.1] * (n // 2) + [0.01] * (n - n // 2),
                         "test_nll": test_nll, "train_nll": train_nll,
                         "weight_norm": weight_norm if weight_norm is not None else np.ones(n)})


def test_history_claims_read_the_runs_histories():
    frame = table({("ce", "raw", "ece", 15): 0.1, ("focal3", "raw", "ece", 15): 0.05}, seeds=(0, 1, 2))
    rising = {f"mnist1d/cnn/ce/r/seed{s}": history([1.0, 0.8, 0.6, 0.5, 0.55, 0.7 + 0.01 * s],
                                                    [1.0, 0.7, 0.5, 0.3, 0.2, 0.1]) for s in range(3)}
    ev = evidence(frame, history=lambda path: rising[path])
    test_rises = evaluate_claim(claim("m20-ce-test-nll-rises"), ev)
    assert test_rises.verdict == HOLDS and test_rises.mean == pytest.approx(np.mean([0.7 + 0.01 * s - 0.5 for s in range(3)]))
    assert evaluate_claim(claim("m20-ce-train-nll-falls"), ev).verdict == HOLDS
    flat = {path: history([1.0, 0.8, 0.6, 0.5, 0.45, 0.4], [1.0] * 6, lr=[0.1] * 6) for path in rising}
    outcome = evaluate_claim(claim("m20-ce-test-nll-rises"), evidence(frame, history=lambda p: flat[p]))
    assert outcome.verdict == NOT_TESTABLE and "never lowers the learning rate" in outcome.reason
    # a run without a drop (a text recipe) leaves the claim to the runs that have one
    mixed = {**rising, "mnist1d/cnn/ce/r/seed2": flat["mnist1d/cnn/ce/r/seed2"]}
    outcome = evaluate_claim(claim("m20-ce-test-nll-rises"), evidence(frame, history=lambda p: mixed[p]))
    assert outcome.n_pairs == 2 and outcome.mean == pytest.approx(np.mean([0.7 + 0.01 * s - 0.5 for s in range(2)]))


def test_weight_norm_ordering_at_the_end():
    frame = table({("ce", "raw", "ece", 15): 0.1, ("focal3", "raw", "ece", 15): 0.05, ("focal1", "raw", "ece", 15): 0.07},
                  seeds=(0, 1))
    norms = {"ce": [1, 2, 3, 4.0], "focal1": [2, 2.5, 3, 3.5], "focal3": [2.5, 2.6, 2.8, 3.0]}
    paths = {f"mnist1d/cnn/{loss}/r/seed{s}": history([1] * 4, [1] * 4, weight_norm=np.array(n) + 0.1 * s)
             for loss, n in norms.items() for s in (0, 1)}
    outcome = evaluate_claim(claim("m20-weight-norm-reverses"), evidence(frame, history=lambda p: paths[p]))
    assert outcome.verdict == HOLDS and outcome.n_pairs == 4
    assert min(zip(outcome.pairs.units, outcome.pairs.labels)) == (("mnist1d", "cnn", "r", 0), "focal1 − ce")


# --------------------------------------------------------------------- charoenphakdee2021


def test_psi_lowers_ece_on_svhn_stand_in_only():
    values = {("focal1", "raw", "ece", 10): lambda s: 0.08 + 0.01 * s, ("focal1", "psi", "ece", 10): lambda s: 0.02,
              ("focal3", "raw", "ece", 10): 0.15, ("focal3", "psi", "ece", 10): lambda s: 0.03 + 0.001 * s,
              ("ce", "raw", "ece", 10): 0.02, ("ce", "psi", "ece", 10): 0.02}
    digits = evidence(table(values, dataset="digits"), paper="charoenphakdee2021")
    outcome = evaluate_claim(claim("c21-psi-standard-svhn"), digits)
    assert outcome.verdict == HOLDS and outcome.n_pairs == 8  # γ > 0 only: CE is no pair
    cifar = evidence(table(values, dataset="mnist1d"), paper="charoenphakdee2021")
    assert evaluate_claim(claim("c21-psi-standard-svhn"), cifar).verdict == NOT_TESTABLE


def test_underconfidence_grows_with_gamma():
    values = {("ce", "raw", "confidence_gap", None): lambda s: 0.01 * s,
              ("focal1", "raw", "confidence_gap", None): lambda s: -0.05 + 0.01 * s,
              ("focal3", "raw", "confidence_gap", None): lambda s: -0.15 + 0.012 * s}
    ev = evidence(table(values, seeds=(0, 1, 2)), paper="charoenphakdee2021")
    outcome = evaluate_claim(claim("c21-underconfidence-grows"), ev)
    assert outcome.verdict == HOLDS and outcome.n_pairs == 6  # (0 -> 1, 1 -> 3) x 3 seeds
    ls = {("focal1_ls", "raw", "ece", 10): lambda s: 0.05 + 0.001 * s, ("focal3_ls", "raw", "ece", 10): lambda s: 0.12}
    grows = evaluate_claim(claim("c21-ls-raw-grows"), evidence(table(ls, seeds=(0, 1, 2)), paper="charoenphakdee2021"))
    assert grows.verdict == HOLDS and grows.n_pairs == 3


def test_kl_to_the_posterior():
    values = {("focal1", "raw", "kl_posterior", None): lambda s: 0.05 + 0.01 * s,
              ("focal1", "psi", "kl_posterior", None): 0.004, ("focal1", "ts_nll", "kl_posterior", None): 0.02}
    ev = evidence(table(values, dataset="synthetic1d", seeds=(0, 1, 2)), paper="charoenphakdee2021")
    assert evaluate_claim(claim("c21-psi-recovers-posterior"), ev).verdict == HOLDS
    assert evaluate_claim(claim("c21-tsnll-misses-posterior"), ev).verdict == HOLDS
    none = evidence(table({("focal1", "raw", "ece", 10): 0.1}, seeds=(0, 1, 2)), paper="charoenphakdee2021")
    assert evaluate_claim(claim("c21-psi-recovers-posterior"), none).verdict == NOT_TESTABLE


# ------------------------------------------------------------------------ komisarenko2024


def test_focal_ts_not_worse_and_temperature_trends():
    values = {("ce", "ts_grid", "adaece", 15): 0.02, ("ce", "fts", "adaece", 15): lambda s: 0.015,
              ("focal3", "ts_grid", "adaece", 15): 0.03, ("focal3", "fts", "adaece", 15): lambda s: 0.026 - 0.001 * s,
              ("ce", "ts_grid", "temperature", None): lambda s: 1.5 + 0.01 * s,
              ("focal1", "ts_grid", "temperature", None): lambda s: 1.1 + 0.02 * s,
              ("focal3", "ts_grid", "temperature", None): lambda s: 0.8}
    fitted = {"fts": {"fitted": {"fitted": {"gammas_": [0.5, 0.0, 1.0], "best_temperature_per_gamma_": [1.3, 1.0, 1.7]}}}}
    ev = evidence(table(values, seeds=(0, 1, 2)), paper="komisarenko2024", calibration=lambda path: fitted)
    assert evaluate_claim(claim("k24-fts-ece"), ev).verdict == HOLDS  # equal or lower: "≤"
    falls = evaluate_claim(claim("k24-temperature-falls"), ev)
    assert falls.verdict == HOLDS and falls.n_pairs == 6
    rises = evaluate_claim(claim("k24-temperature-rises-with-gamma-ev"), ev)
    assert rises.verdict == HOLDS and rises.mean == pytest.approx(0.35)  # sorted by γ_ev: 1.0 -> 1.3 -> 1.7


# ---------------------------------------------------------------------------- hossain2021


def seg_table(dfl_iou, ce_iou, gdl_iou, folds=(0, 1, 2)):
    rows = []
    for loss, iou in (("dfl", dfl_iou), ("ce", ce_iou), ("gdl", gdl_iou)):
        for fold in folds:
            for cls, value in (("0", 0.95), ("1", iou(fold)), ("mean", (0.95 + iou(fold)) / 2)):
                rows.append({"dataset": "seg", "model": "unet", "loss": loss, "recipe": "r", "seed": fold,
                             "status": "trained", "metric": "iou", "class": cls, "value": value})
            rows.append({"dataset": "seg", "model": "unet", "loss": loss, "recipe": "r", "seed": fold,
                         "status": "trained", "metric": "hausdorff", "class": "mean", "value": 10 - 5 * iou(fold)})
    return pd.DataFrame(rows)


def test_segmentation_claims():
    ev = evidence(seg_table(lambda f: 0.7 + 0.01 * f, lambda f: 0.5, lambda f: 0.6), paper="hossain2021")
    assert ev.segmentation
    for key in ("h21-minority-iou", "h21-hausdorff", "h21-dfl-best-iou"):
        assert evaluate_claim(claim(key), ev).verdict == HOLDS, key
    worse = evidence(seg_table(lambda f: 0.4, lambda f: 0.5 + 0.01 * f, lambda f: 0.6), paper="hossain2021")
    assert evaluate_claim(claim("h21-dfl-best-iou"), worse).verdict == FAILS
    classification = evidence(ece_table(0.1, 0.05), paper="hossain2021")
    assert evaluate_claim(claim("h21-minority-iou"), classification).verdict == NOT_TESTABLE


# ------------------------------------------------------------------------------- tables


def test_claims_table_and_scoreboard():
    posterior = evidence(table({("focal1", "raw", "kl_posterior", None): lambda s: 0.05 + 0.01 * s,
                                ("focal1", "psi", "kl_posterior", None): 0.004}, dataset="synthetic1d"),
                         paper="charoenphakdee2021")
    posterior.study = "posterior"
    paradigms = evidence(table({("focal1", "raw", "ece", 10): 0.1}), paper="charoenphakdee2021")
    paradigms.study = "paradigms"
    frame = claims_table([posterior, paradigms])
    assert len(frame) == 2 * len(CLAIMS["charoenphakdee2021"])
    assert set(frame["verdict"]) <= {HOLDS, FAILS, INCONCLUSIVE, NOT_TESTABLE}
    board = scoreboard(frame)
    assert len(board) == len(CLAIMS["charoenphakdee2021"])  # one row per claim when no study tests it twice
    kl = board.set_index("claim").loc["c21-psi-recovers-posterior"]
    assert kl["verdict"] == HOLDS and kl["study"] == "posterior"
    untested = board.set_index("claim").loc["c21-tsfl-psi"]
    assert untested["verdict"] == NOT_TESTABLE and untested["study"] == "posterior, paradigms"


# ------------------------------------------------------------------ evidence, by hand

T_975_3 = 3.182446305284263  # t_{0.975, 3}: four pairs
CE_ECE, FL3_ECE, FLSD_ECE = [0.12, 0.15, 0.11, 0.14, 0.5], [0.05, 0.07, 0.06, 0.04, 0.06], [0.16, 0.18, 0.15, 0.19, 0.2]
CE_T, FL3_T = [2.5, 2.0, 2.6, 1.9, 2.2], [2.1, 2.3, 2.0, 2.2, 1.0]
CE_S99, FL3_S99 = [0.30, 0.20, 0.25, 0.22, 0.9], [0.28, 0.21, 0.22, 0.24, 0.1]


def evidence_study():
    """A mukhoti2020 study of 5 seeds whose CE seed 4 collapsed: every claim pairs seeds 0-3."""
    frame = table({("ce", "raw", "ece", 15): CE_ECE.__getitem__, ("focal3", "raw", "ece", 15): FL3_ECE.__getitem__,
                   ("flsd53", "raw", "ece", 15): FLSD_ECE.__getitem__,
                   ("ce", "ts_ece", "temperature", None): CE_T.__getitem__,
                   ("focal3", "ts_ece", "temperature", None): FL3_T.__getitem__,
                   ("ce", "ts_ece", "s99_share", None): CE_S99.__getitem__,
                   ("focal3", "ts_ece", "s99_share", None): FL3_S99.__getitem__},
                  seeds=range(5), status={("ce", 4): "collapsed"})
    return evidence(frame)


def by_hand(candidate, baseline):
    """Differences over seeds 0-3, their mean, and the 95 % Student-t interval, written out."""
    d = [candidate[s] - baseline[s] for s in range(4)]
    mean = sum(d) / 4
    sd = math.sqrt(sum((x - mean) ** 2 for x in d) / 3)
    return d, mean, mean - T_975_3 * sd / 2, mean + T_975_3 * sd / 2, sd


def needed_by_scan(mean, sd):
    """The first m >= 4 whose interval half-width is below |mean|: a plain scan."""
    m = 4
    while stats.t.ppf(0.975, m - 1) * sd / math.sqrt(m) >= abs(mean):
        m += 1
    return m


def test_evidence_numbers_equal_those_recomputed_by_hand_for_each_verdict():
    from focalcal.claims import evaluate
    from focalcal.training.health import status_rules

    claims, pairs = evaluate([evidence_study()])
    rows = claims.set_index("claim")
    cases = {  # claim: (verdict, candidate, baseline, pairs the paper's way)
        "m20-fl3-ece-pre": (HOLDS, FL3_ECE, CE_ECE, 4),
        "m20-flsd53-ece-pre": (FAILS, FLSD_ECE, CE_ECE, 0),
        "m20-focal-lower-temperature": (INCONCLUSIVE, FL3_T, CE_T, 2),
        "m20-s99-after-ts": (INCONCLUSIVE, FL3_S99, CE_S99, 2),
    }
    for key, (verdict, candidate, baseline, paper_way) in cases.items():
        d, mean, low, high, sd = by_hand(candidate, baseline)
        row = rows.loc[key]
        assert row["verdict"] == verdict, key
        assert (row["n_pairs"], row["n_paper_way"]) == (4, paper_way), key
        assert (row["mean"], row["ci_low"], row["ci_high"]) == pytest.approx((mean, low, high), rel=1e-12), key
        mine = pairs[pairs["claim"] == key].sort_values("seed")
        assert list(mine["seed"]) == [0, 1, 2, 3] and set(mine["dataset"]) == {"mnist1d"}, key
        assert list(mine["difference"]) == pytest.approx(d, rel=1e-12), key
        assert mine["paper_way"].sum() == paper_way, key
        assert "mnist1d/cnn/ce/r/seed4 (collapsed: " + status_rules()["collapsed"] + ")" in row["excluded_runs"]
    assert rows.loc["m20-fl3-ece-pre", "interval_contains"] == "only values below 0"
    assert rows.loc["m20-flsd53-ece-pre", "interval_contains"] == "only values above 0"
    assert pd.isna(rows.loc["m20-fl3-ece-pre", "pairs_needed"])
    # inconclusive, the mean on the paper's side (T: FL-3 below CE): pairs that would exclude 0
    d, mean, low, high, sd = by_hand(FL3_T, CE_T)
    assert mean < 0 and rows.loc["m20-focal-lower-temperature", "interval_contains"] == "the threshold 0"
    assert rows.loc["m20-focal-lower-temperature", "pairs_needed"] == needed_by_scan(mean, sd)
    assert f"{needed_by_scan(mean, sd)} pairs would exclude 0" in rows.loc["m20-focal-lower-temperature", "reason"]
    # inconclusive, the mean on the other side (|S99|: the paper says FL-3 above CE): no number would
    assert by_hand(FL3_S99, CE_S99)[1] < 0 and pd.isna(rows.loc["m20-s99-after-ts", "pairs_needed"])
    assert "the mean lies on the other side of 0" in rows.loc["m20-s99-after-ts", "reason"]
    # not testable: no per-epoch history for the training-dynamics claims, and no pair rows
    assert rows.loc["m20-weight-norm-reverses", "verdict"] == NOT_TESTABLE
    assert (pairs["claim"] == "m20-weight-norm-reverses").sum() == 0
    assert rows.loc["m20-weight-norm-reverses", "n_paper_way"] == 0


def test_pairs_needed_with_no_spread_and_too_few_pairs():
    from focalcal.claims.verdict import pairs_needed

    assert pairs_needed(-0.1, 0.0, 2, Direction.BELOW) == 3  # no spread: the floor of 3 pairs decides
    assert pairs_needed(0.1, 0.05, 4, Direction.BELOW) is None  # the mean is on the other side
    assert pairs_needed(0.0, 0.05, 4, Direction.AT_MOST) is None  # at the threshold: never excluded
    outcome = judge(Pairs([-1.0, -2.0], [("d", "m", "r", 0), ("d", "m", "r", 1)], ["a", "b"]), Direction.BELOW)
    assert outcome.pairs_needed == needed_by_scan(-1.5, math.sqrt(0.5)) and outcome.n_paper_way == 2


# ------------------------------------------------------------------ claim notes


@pytest.mark.parametrize("note, figure", [
    ("over 21 pairs the interval is -0.4 to +2.5", "21 pairs"), ("CE measures 14.6 % ECE", "14.6 %"),
    ("FL-3 ends at T = 2.7", "T = 2.7"), ("lowest on 3 of 5 seeds", "3 of 5"), ("a mean of −0.005", "−0.005"),
    ("0.82-0.83 in every fold", "0.82-0.83"), ("the budget measures 1.46×", "1.46×"),
    ("3.0 px below CE's", "3.0 px")])
def test_a_note_that_states_a_measured_figure_is_refused_with_its_key_path(note, figure):
    from focalcal.claims.notes import measured_figures
    from focalcal.pipeline import ConfigError, load_config_file, validate_config

    assert figure in measured_figures(note)
    config = load_config_file(ROOT / "config" / "config.yaml")
    config["report"]["claim_notes"]["m20-error-on-par"] = note
    with pytest.raises(ConfigError, match=r"report\.claim_notes\.m20-error-on-par: states figure\(s\) the run measures"):
        validate_config(config, ROOT / "workflow" / "schemas" / "config.schema.yaml")


def test_a_note_of_reasons_with_settings_and_sources_passes():
    from focalcal.claims.notes import measured_figures

    note = ("The paper's §6 models are underconfident at every γ > 0 (§6.1, Fig 4; Table 1); ours train FL-3 and "
            "FLSD-53 with γ = 0-3, LS 0.1 and 3 seeds on MNIST-1D, 5,000 validation signals.")
    assert measured_figures(note) == []
