"""komisarenko2024 — Komisarenko et al. 2024, "Improving calibration by relating focal loss,
temperature scaling, and properness": the focal calibration map, its closest temperature and
focal temperature scaling."""

from focalcal import catalog

PAPER = catalog.paper_of_package(__name__)  # its entry in catalog.PAPERS
KEY = PAPER.key
