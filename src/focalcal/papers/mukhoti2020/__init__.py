"""mukhoti2020 — Mukhoti et al. 2020, "Calibrating deep neural networks using focal loss": why
cross-entropy models grow overconfident, focal loss with fixed, scheduled and sample-dependent
γ, and their calibration before and after temperature scaling."""

from focalcal import catalog

PAPER = catalog.paper_of_package(__name__)  # its entry in catalog.PAPERS
KEY = PAPER.key
