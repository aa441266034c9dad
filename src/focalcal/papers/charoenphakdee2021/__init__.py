"""charoenphakdee2021 — Charoenphakdee et al. 2021, "On focal loss for class-posterior probability
estimation": φ^γ, τ_oc/τ_uc, the focal risk minimiser and the transform Ψ^γ that recovers the
class posterior from a focal-loss model."""

from focalcal.papers import Paper, TheoryFigure

KEY = "charoenphakdee2021"

PAPER = Paper(
    KEY, "Charoenphakdee et al. 2021 — Focal loss and class posteriors (φ^γ, τ_oc/τ_uc, Ψ^γ)", order=1,
    theory={
        f"{KEY}_fig1_phi": TheoryFigure(
            KEY, "Fig 1: φ^γ with the η-overconfident (τ_oc) and η-underconfident (τ_uc) regions", "phi_figure"),
        f"{KEY}_fig2_posterior_vs_minimizer": TheoryFigure(
            KEY, "Fig 2: max η against max q* of the focal risk minimiser, K = 2 and K = 1000",
            "posterior_vs_minimizer_figure"),
    },
)
