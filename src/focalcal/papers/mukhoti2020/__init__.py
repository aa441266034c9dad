"""mukhoti2020 — Mukhoti et al. 2020, "Calibrating deep neural networks using focal loss": why
cross-entropy models grow overconfident, focal loss with fixed, scheduled and sample-dependent
γ, and their calibration before and after temperature scaling."""

from focalcal import catalog

PAPER = catalog.paper_of_package(__name__)  # its entry in catalog.PAPERS
KEY = PAPER.key


def calibration_stages(study, views=None) -> tuple[str | None, str | None, str | None]:
    """(calibrator key before calibration, key after, the role after) in ``study`` (over ``views``,
    default all its runs): the first of each stage's roles in the paper's entry (``PAPER.roles``)
    that the study has; None where it has none."""
    pre = study.role_key(PAPER.roles["before"][0], views)
    post_role = next((role for role in PAPER.roles["after"] if study.role_key(role, views)), None)
    return pre, (study.role_key(post_role, views) if post_role else None), post_role
