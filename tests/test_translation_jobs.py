"""The translation jobs: token-level temperature scaling against the full logits, and a decode's
BLEU against sacrebleu on its own output."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from focalcal import metrics
from focalcal._io import read_csv
from focalcal.calibration.temperature import MUKHOTI_TEMPERATURES
from focalcal.pipeline.translation import DECODE_TEMPERATURES, calibrate_tokens
from focalcal.translation.token_profile import profile_from_logits, write_token_profile

VOCAB = 40
ROLES = {"uncalibrated": {"build": {"name": "identity"}},
         "ts_ece": {"build": {"name": "temperature_scaling", "objective": "ece", "temperatures": "mukhoti", "n_bins": 15}},
         "ts_nll": {"build": {"name": "temperature_scaling", "objective": "nll"}}}


def _split(generator, n_tokens: int, sharpness: float):
    """Overconfident logits (scaled by ``sharpness``) whose labels are right about 60 % of the time."""
    logits = torch.randn(n_tokens, VOCAB, generator=generator, dtype=torch.float64)
    labels = logits.argmax(1).clone()
    wrong = torch.rand(n_tokens, generator=generator) < 0.4
    labels[wrong] = torch.randint(0, VOCAB, (int(wrong.sum()),), generator=generator)
    return (logits * sharpness).float(), labels, torch.arange(n_tokens) // 7


@pytest.fixture(scope="module")
def splits():
    generator = torch.Generator().manual_seed(3)
    return {"val": _split(generator, 3000, 8.0), "test": _split(generator, 2500, 8.0)}


def _independent(logits, labels, temperature: float):
    """(ECE 15 bins, mean NLL) of the full softmax at ``temperature``, from the (N, V) logits."""
    log_p = torch.log_softmax(logits.double() / temperature, dim=1)
    nll = float(-log_p.gather(1, labels[:, None]).mean())
    return metrics.ece(log_p.exp().numpy(), labels.numpy(), n_bins=15), nll


def test_token_calibration_equals_the_full_logits(tmp_path, splits):
    profile = tmp_path / "token_logits.npz"
    write_token_profile(profile, *(profile_from_logits(*splits[s]) for s in ("val", "test")))
    out = {name: tmp_path / name for name in ("calibration.json", "metrics.csv", "curve.csv")}
    calibrate_tokens(profile, ROLES, [10, 15], out["calibration.json"], out["metrics.csv"], out["curve.csv"])

    # T of each objective: the first minimiser over the paper's grid, scanned on the full val logits
    val_logits, val_labels, _ = splits["val"]
    scores = np.array([_independent(val_logits, val_labels, t) for t in MUKHOTI_TEMPERATURES])
    expected_t = {"ts_ece": MUKHOTI_TEMPERATURES[np.argmin(scores[:, 0])],
                  "ts_nll": MUKHOTI_TEMPERATURES[np.argmin(scores[:, 1])], "uncalibrated": 1.0}
    assert expected_t["ts_ece"] > 1.5  # the fixture is overconfident: TS has work to do
    fitted = json.loads(out["calibration.json"].read_text())
    assert {k: fitted[k]["fitted"]["temperature"] for k in ROLES} == pytest.approx(expected_t)

    test_logits, test_labels, _ = splits["test"]
    table = read_csv(out["metrics.csv"])
    table["bins"] = table["bins"].fillna(0).astype(int)
    for key, t in expected_t.items():
        rows = table[table["calibrator"] == key].set_index(["metric", "bins"])["value"]
        ece, nll = _independent(test_logits, test_labels, t)
        assert rows["ece", 15] == pytest.approx(ece, abs=1e-9)
        assert rows["ece", 10] == pytest.approx(metrics.ece(torch.softmax(test_logits.double() / t, 1).numpy(),
                                                            test_labels.numpy(), n_bins=10), abs=1e-9)
        assert rows["nll", 0] == pytest.approx(nll, rel=1e-9)
        assert rows["error", 0] == pytest.approx(float((test_logits.argmax(1) != test_labels).double().mean()))
        assert ("temperature", 0) in rows.index if key != "uncalibrated" else ("temperature", 0) not in rows.index
    ece_raw = table[(table["calibrator"] == "uncalibrated") & (table["metric"] == "ece") & (table["bins"] == 15)]
    ece_ts = table[(table["calibrator"] == "ts_ece") & (table["metric"] == "ece") & (table["bins"] == 15)]
    assert float(ece_ts["value"].iloc[0]) < float(ece_raw["value"].iloc[0]) - 0.05

    curve = read_csv(out["curve.csv"])
    assert list(curve["temperature"]) == pytest.approx(list(DECODE_TEMPERATURES))
    for row in curve.itertuples():
        assert (row.val_ece, row.val_nll) == pytest.approx(_independent(val_logits, val_labels, row.temperature), abs=1e-9)
        assert (row.test_ece, row.test_nll) == pytest.approx(_independent(test_logits, test_labels, row.temperature),
                                                             abs=1e-9)


def test_a_calibrator_a_token_profile_cannot_fit_is_refused_by_its_key(tmp_path, splits):
    profile = tmp_path / "token_logits.npz"
    write_token_profile(profile, *(profile_from_logits(*splits[s]) for s in ("val", "test")))
    psi = {"psi": {"build": {"name": "psi", "gamma": 1.0}}}
    with pytest.raises(ValueError, match=r"calibrator 'psi' \(Ψ\^γ\) cannot be fitted on a translation run's token "
                                         r"profile; use one of the roles \['raw', 'ts_ece', 'ts_nll'\]"):
        calibrate_tokens(profile, psi, [15], tmp_path / "c.json", tmp_path / "m.csv", tmp_path / "k.csv")
    assert not (tmp_path / "c.json").exists()
