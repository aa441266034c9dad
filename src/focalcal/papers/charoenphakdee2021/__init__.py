"""charoenphakdee2021 — Charoenphakdee et al. 2021, "On focal loss for class-posterior probability
estimation": φ^γ, τ_oc/τ_uc, the focal risk minimiser and the transform Ψ^γ that recovers the
class posterior from a focal-loss model."""

from focalcal import catalog

PAPER = catalog.paper_of_package(__name__)  # its entry in catalog.PAPERS
KEY = PAPER.key
