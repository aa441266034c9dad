"""mukhoti2020's claims (§3 Figs 2-3, §5 Tables 1, 4, §5.2 Table 3 and Fig 5, Appendix F Table 13),
tested on its studies.

ECE is the paper's: 15 equal-width bins. "After TS" is temperature scaling with T chosen
by val ECE on the paper's grid (§5), or by val NLL when the study has only that. The
baselines of "FLSD-53 … outperforms all the baselines" are the paper's: cross-entropy,
Brier score, MMCE and label smoothing (§5). The translation claims (§5.2) read a study's
translation runs only, those with a ``bleu`` row; the training-dynamics claims (§3, §4) leave
them out.
"""

from __future__ import annotations

import math

from focalcal.claims.claim import Claim, NotTestable, compare_losses, compare_with_best
from focalcal.claims.evidence import StudyEvidence
from focalcal.claims.verdict import Direction, LowerBounds, Pairs
from focalcal.papers.mukhoti2020 import KEY as PAPER
from focalcal.pipeline.translation import DECODE_GRID_MAX, DECODE_GRID_MIN

ERROR_MARGIN = 0.01  # ours: "on par" = FL's test error at most 1 point above CE's (the paper gives no margin)
BINS = 15
# ours: "around the same temperature" = the grid temperature of the highest test BLEU at most
# this far from the val-ECE temperature (two steps of the 0.1 grid; the paper gives no margin)
TEMPERATURE_MARGIN = 0.2
GRID_TOLERANCE = 1e-9  # temperatures are read back from CSV: a grid end must count as on the grid


def _bins(evidence: StudyEvidence):
    bins = sorted(evidence.table["bins"].dropna().unique())
    return BINS if BINS in bins else (bins[0] if bins else None)


def _loss(evidence: StudyEvidence, accept) -> str | None:
    keys = evidence.loss_keys(accept)
    return keys[0] if keys else None


def _ce(evidence):
    return _loss(evidence, lambda i: i.name == "cross_entropy" or (i.name == "focal" and i.gamma == 0 and not i.smoothing))


def _fl3(evidence):
    return _loss(evidence, lambda i: i.name == "focal" and i.gamma == 3 and not i.smoothing)


def _flsd53(evidence):
    return _loss(evidence, lambda i: i.name == "flsd53")


def _fixed_focal(evidence):
    return evidence.loss_keys(lambda i: i.name == "focal" and (i.gamma or 0) > 0 and not i.smoothing)


def _post(evidence):
    return evidence.calibrator("ts_ece", "ts_nll", "ts_grid_ece", "ts_grid_nll")


def _versus_ce(candidate, metric: str, stage: str):
    def test(evidence: StudyEvidence) -> Pairs | NotTestable:
        calibrator = evidence.calibrator("raw") if stage == "raw" else _post(evidence)
        if calibrator is None:
            return NotTestable("needs " + ("the uncalibrated model" if stage == "raw" else "temperature scaling"))
        names = [candidate(evidence)] if callable(candidate) else candidate
        losses = [key for key in names if key]
        bins = _bins(evidence) if metric in ("ece", "adaece") else None
        return compare_losses(evidence, losses, _ce(evidence), metric, calibrator, bins=bins, what="cross-entropy")
    return test


def _error_on_par(evidence: StudyEvidence) -> Pairs | NotTestable:
    raw = evidence.calibrator("raw")
    losses = [key for key in (_fl3(evidence), _flsd53(evidence)) if key]
    if raw is None or not losses:
        return NotTestable("needs FL-3 or FLSD-53 runs with the uncalibrated model")
    return compare_losses(evidence, losses, _ce(evidence), "error", raw, what="cross-entropy")


def _flsd53_lowest_after_ts(evidence: StudyEvidence) -> Pairs | NotTestable:
    post, flsd = _post(evidence), _flsd53(evidence)
    baselines = evidence.loss_keys(lambda i: i.name in ("cross_entropy", "brier", "mmce", "label_smoothing"))
    if post is None or flsd is None or not baselines:
        return NotTestable("needs FLSD-53 and at least one baseline (CE, Brier, MMCE, LS) with temperature scaling")
    return compare_with_best(evidence, flsd, baselines, "ece", post, bins=_bins(evidence))


def _reference_epoch(history) -> int | None:
    """Index of the first epoch after the first learning-rate drop (the paper's epoch 150)."""
    lr = history["lr"].to_numpy()
    dropped = [i for i in range(1, len(lr)) if lr[i] < lr[0] * (1 - 1e-9)]
    return dropped[0] if dropped and dropped[0] < len(lr) - 1 else None


def _history_change(column: str):
    """d = column at the last epoch − at the first epoch after the first LR drop, per CE run.

    Fig 2's runs drop the learning rate; a run whose recipe never does (App. D's text recipes)
    has no such epoch and does not enter the claim. With no run left the claim is not testable.
    """
    def test(evidence: StudyEvidence) -> Pairs | NotTestable:
        ce = _ce(evidence)
        if ce is None or evidence.history is None:
            return NotTestable("needs a cross-entropy run with its per-epoch history")
        pairs, without_drop = Pairs(), []
        words = _translation_datasets(evidence)
        for unit, path in evidence.runs(ce):
            if unit[0] in words:
                continue
            history = evidence.history(path)
            start = _reference_epoch(history)
            if start is None:
                without_drop.append(unit[2])
                continue
            values = history[column].to_numpy(dtype=float)
            pairs.add(float(values[-1] - values[start]), unit, f"epoch {len(values)} − epoch {start + 1}")
        if not pairs and without_drop:
            recipes = ", ".join(repr(recipe) for recipe in sorted(set(without_drop)))
            return NotTestable(f"recipe {recipes} never lowers the learning rate before its last epoch")
        return pairs
    return test


def _weight_norm_end(evidence: StudyEvidence) -> Pairs | NotTestable:
    ce, focal = _ce(evidence), _fixed_focal(evidence)
    if ce is None or not focal or evidence.history is None:
        return NotTestable("needs cross-entropy and fixed-γ focal runs with per-epoch histories")
    last, words = {}, _translation_datasets(evidence)
    for loss in [ce, *focal]:
        for unit, path in evidence.runs(loss):
            if unit[0] in words:
                continue
            norms = evidence.history(path)["weight_norm"].to_numpy(dtype=float)
            last[(loss, unit)] = norms[-1] if len(norms) and not math.isnan(norms[-1]) else None
    pairs = Pairs()
    for (loss, unit), value in last.items():
        base = last.get((ce, unit))
        if loss != ce and value is not None and base is not None:
            pairs.add(value - base, unit, f"{loss} − {ce}")
    return pairs


def _translation_datasets(evidence: StudyEvidence) -> set[str]:
    """The study's datasets whose runs were decoded (they have BLEU): its translation runs."""
    table = evidence.table
    return set(table.loc[table["metric"] == "bleu", "dataset"])


def _translation_losses(evidence: StudyEvidence, accept) -> list[str]:
    table = evidence.table
    decoded = set(table.loc[table["metric"] == "bleu", "loss"])
    return [key for key in evidence.loss_keys(accept) if key in decoded]


def _fl1_against_baselines(metric: str, best):
    """d = metric(FL γ = 1) − best of cross-entropy and label smoothing, the models as trained (T = 1)."""
    def test(evidence: StudyEvidence) -> Pairs | NotTestable:
        raw = evidence.calibrator("raw")
        focal = _translation_losses(evidence, lambda i: i.name == "focal" and i.gamma == 1 and not i.smoothing)
        baselines = _translation_losses(evidence, lambda i: i.name in ("cross_entropy", "label_smoothing") or (
            i.name == "focal" and i.gamma == 0 and not i.smoothing))
        if raw is None or not focal or not baselines:
            return NotTestable("needs translation runs of focal loss γ = 1 and of cross-entropy or label smoothing, "
                               "with the uncalibrated model")
        return compare_with_best(evidence, focal[0], baselines, metric, raw, bins=_bins(evidence) if metric == "ece"
                                 else None, best=best, datasets=_translation_datasets(evidence))
    return test


def _bleu_peak_near_ece_temperature(evidence: StudyEvidence) -> Pairs | LowerBounds | NotTestable:
    """d = |T of the highest test BLEU − T of the lowest val ECE| per translation run.

    The best BLEU is searched on the decode grid only, the val-ECE temperature on the wider TS
    grid: a run whose val-ECE temperature lies outside the decode grid's range has no BLEU
    measured there, so its d cannot show the claim either way. Any such run makes the claim
    not testable, naming it: leaving it out would keep only the runs whose optimum the grid sees.
    A run whose best BLEU lies on the decode grid's lowest or highest temperature may peak beyond
    it: its d is a lower bound (:class:`LowerBounds`), which can show the claim fails but never
    that it holds; the claim is then inconclusive, naming those runs."""
    raw, ts_ece = evidence.calibrator("raw"), evidence.calibrator("ts_ece")
    losses = _translation_losses(evidence, lambda i: True)
    if raw is None or ts_ece is None or not losses:
        return NotTestable("needs translation runs with the uncalibrated model and temperature scaling by val ECE")
    pairs, off_grid, on_edge = Pairs(), [], []
    datasets = _translation_datasets(evidence)
    for loss in losses:
        peak = evidence.values(loss, "bleu_best_temperature", raw, datasets=datasets)
        lowest = evidence.values(loss, "temperature", ts_ece, datasets=datasets)
        low, high = (evidence.values(loss, metric, raw, datasets=datasets) for metric in (DECODE_GRID_MIN, DECODE_GRID_MAX))
        for unit in peak.index.intersection(lowest.index):
            dataset, model, recipe, seed = unit
            run = f"{dataset}/{model}/{loss}/{recipe}/seed{seed}"
            if unit not in low.index or unit not in high.index:
                return NotTestable(f"run {run} has no decode grid range in its metrics.csv (rows {DECODE_GRID_MIN}, "
                                   f"{DECODE_GRID_MAX}); re-make it")
            t = float(lowest[unit])
            if not low[unit] - GRID_TOLERANCE <= t <= high[unit] + GRID_TOLERANCE:
                off_grid.append(f"run {run}: T = {t:g} by val ECE, decode grid {low[unit]:g} to {high[unit]:g}")
                continue
            best = float(peak[unit])
            if best <= low[unit] + GRID_TOLERANCE or best >= high[unit] - GRID_TOLERANCE:
                end = "lowest" if best <= low[unit] + GRID_TOLERANCE else "highest"
                on_edge.append(f"run {run}: best BLEU at T = {best:g}, the decode grid's {end} temperature "
                               f"({low[unit]:g} to {high[unit]:g})")
            pairs.add(abs(best - t), unit, f"{loss}: |T best BLEU − T lowest val ECE|")
    if off_grid:
        return NotTestable("the val-ECE temperature of a run lies outside its decode grid, where no BLEU was measured, "
                           "so the grid cannot show where its BLEU peaks (widen decode_temperatures): "
                           + "; ".join(off_grid))
    if on_edge:
        return LowerBounds(pairs, "the best BLEU of a run lies on its decode grid's edge, so the grid does not show "
                                  "where its BLEU peaks and its |T best BLEU − T lowest val ECE| is only a lower "
                                  "bound, which cannot show the claim holds (widen decode_temperatures): "
                           + "; ".join(on_edge))
    return pairs


CLAIMS = [
    Claim("m20-fl3-ece-pre", PAPER,
          "Focal loss with γ = 3 gives a lower ECE than cross-entropy before temperature scaling.",
          "§5, Table 1 (pre T)", "ECE (15 bins) before TS: FL-3 − CE",
          Direction.BELOW, _versus_ce(_fl3, "ece", "raw")),
    Claim("m20-flsd53-ece-pre", PAPER,
          "Focal loss with sample-dependent γ (FLSD-53) gives a lower ECE than cross-entropy before temperature scaling.",
          "§5, Table 1 (pre T)", "ECE (15 bins) before TS: FLSD-53 − CE",
          Direction.BELOW, _versus_ce(_flsd53, "ece", "raw")),
    Claim("m20-flsd53-lowest-post", PAPER,
          "FLSD-53 broadly produces the lowest ECE of all the baselines (cross-entropy, label smoothing, Brier score, "
          "MMCE), also after temperature scaling.",
          "§5, Table 1 (post T)", "ECE (15 bins) after TS: FLSD-53 − the lowest baseline",
          Direction.BELOW, _flsd53_lowest_after_ts),
    Claim("m20-error-on-par", PAPER,
          "Focal loss does not cost accuracy: its test error is on par with cross-entropy's.",
          "§5, Table 4", f"test error: FL-3 / FLSD-53 − CE; 'on par' = below +{ERROR_MARGIN:g} (our margin)",
          Direction.BELOW, _error_on_par, threshold=ERROR_MARGIN),
    Claim("m20-ce-test-nll-rises", PAPER,
          "With cross-entropy, the test NLL rises after the learning rate drops: the network starts to overfit "
          "the NLL.",
          "§3, Fig 2a", "CE test NLL: last epoch − first epoch after the first LR drop",
          Direction.ABOVE, _history_change("test_nll")),
    Claim("m20-ce-train-nll-falls", PAPER,
          "Meanwhile the cross-entropy model's train NLL keeps decreasing.",
          "§3, Fig 2a", "CE train NLL: last epoch − first epoch after the first LR drop",
          Direction.BELOW, _history_change("train_nll")),
    Claim("m20-weight-norm-reverses", PAPER,
          "As training progresses the ordering of the last layer's weight norms reverses: by the end, focal-loss "
          "models have a smaller weight norm than the cross-entropy model.",
          "§4, Fig 3e", "last-layer weight norm at the last epoch: FL γ > 0 − CE",
          Direction.BELOW, _weight_norm_end),
    Claim("m20-focal-lower-temperature", PAPER,
          "Focal-loss models need a smaller optimal temperature than cross-entropy (≈ 1.1 against 2.5-2.8).",
          "Appendix F, Table 13 text; Table 1 (T)", "optimal temperature of TS: FL-3 − CE",
          Direction.BELOW, _versus_ce(_fl3, "temperature", "post")),
    Claim("m20-s99-after-ts", PAPER,
          "After temperature scaling the focal-loss model keeps more confident predictions: a larger share of test "
          "samples with confidence ≥ 0.99 than cross-entropy.",
          "Appendix F, Table 13", "|S99| share after TS: FL-3 − CE",
          Direction.ABOVE, _versus_ce(_fl3, "s99_share", "post")),
    Claim("m20-mt-fl-lowest-ece", PAPER,
          "In machine translation (WMT 2014 En-De, Transformer), focal loss (γ = 1) obtains the lowest test ECE "
          "of the three models, below cross-entropy and label smoothing (α = 0.1).",
          "§5.2, Table 3 (pre T)", "token ECE (15 bins) of the model as trained: FL-1 − the lowest of CE and LS",
          Direction.BELOW, _fl1_against_baselines("ece", min)),
    Claim("m20-mt-fl-highest-bleu", PAPER,
          "In machine translation, focal loss (γ = 1) obtains the highest test BLEU of the three models.",
          "§5.2, Table 3 (pre T)", "test BLEU of beam search at T = 1: FL-1 − the highest of CE and LS",
          Direction.ABOVE, _fl1_against_baselines("bleu", max)),
    Claim("m20-mt-bleu-near-low-ece", PAPER,
          "The translation models obtain the highest BLEU scores at around the same temperatures at which they "
          "obtain low ECEs.",
          "§5.2, Fig 5", "|T of the highest test BLEU on the decode grid − T of the lowest val ECE (TS grid)|; "
          f"'around' = at most {TEMPERATURE_MARGIN:g} (our margin)",
          Direction.AT_MOST, _bleu_peak_near_ece_temperature, threshold=TEMPERATURE_MARGIN),
]
