"""Agreement with netcal, the calibration library practitioners compare against: its ECE and MCE,
histogram binning and isotonic regression on the same inputs.

netcal is in the ``dev`` extra only (netcal 1.4 needs numpy >= 2 and 1.3 matplotlib < 3.8), so
these run under requirements/lock.txt, not in the library's lowest/newest environments of
.ci/package_test.sh, whose tests compare against torchmetrics, scikit-learn and closed forms.
"""

from __future__ import annotations

import numpy as np
import pytest
from netcal.binning import HistogramBinning as NetcalHistogramBinning
from netcal.binning import IsotonicRegression as NetcalIsotonicRegression
from netcal.metrics import ECE as NetcalECE
from netcal.metrics import MCE as NetcalMCE
from scipy.special import softmax
from test_calibration import sample_labels
from test_metrics_calibration import random_problem

from focalcal.calibration import HistogramBinning, IsotonicCalibration
from focalcal.metrics import ece, mce


@pytest.fixture(scope="module")
def overconfident():
    """Validation and test logits 3x too sharp for their labels."""
    rng = np.random.default_rng(2)
    logits = rng.normal(size=(8000, 5)) * 1.5
    labels = sample_labels(rng, softmax(logits, axis=1))
    return 3 * logits[:4000], labels[:4000], 3 * logits[4000:], labels[4000:]


@pytest.mark.filterwarnings("ignore")
@pytest.mark.parametrize("seed", [3, 4])
def test_ece_and_mce_match_netcal_top_label(seed):
    probs, labels = random_problem(seed, n=2000, k=5, scale=2.0)
    # netcal bins with np.histogramdd ([a, b), last bin closed) after clipping to
    # (eps, 1 - eps): the same bins as ours away from the edges.
    assert ece(probs, labels) == pytest.approx(NetcalECE(bins=15).measure(probs, labels), abs=1e-12)
    assert mce(probs, labels) == pytest.approx(NetcalMCE(bins=15).measure(probs, labels), abs=1e-12)
    # netcal's equal-mass bins (equal_intervals=False) interpolate quantiles and use
    # left-closed bins, so bin membership differs by a sample here and there; not compared.


def test_histogram_binning_matches_netcal(overconfident):
    val_logits, val_labels, test_logits, _ = overconfident
    ours = HistogramBinning(n_bins=10).fit(val_logits, val_labels).transform(test_logits)
    theirs = NetcalHistogramBinning(bins=10).fit(softmax(val_logits, axis=1), val_labels)
    np.testing.assert_allclose(ours, theirs.transform(softmax(test_logits, axis=1)), atol=1e-9)


def test_isotonic_matches_netcal(overconfident):
    val_logits, val_labels, test_logits, _ = overconfident
    ours = IsotonicCalibration().fit(val_logits, val_labels).transform(test_logits)
    val_probs, test_probs = softmax(val_logits, axis=1), softmax(test_logits, axis=1)
    theirs = NetcalIsotonicRegression().fit(val_probs, val_labels).transform(test_probs)
    np.testing.assert_allclose(ours, theirs, atol=1e-9)
