"""mukhoti2020 — Mukhoti et al. 2020, "Calibrating deep neural networks using focal loss": why
cross-entropy models grow overconfident, focal loss with fixed, scheduled and sample-dependent
γ, and their calibration before and after temperature scaling."""

from focalcal.papers import Paper, TheoryFigure

KEY = "mukhoti2020"

_COARSE_LINEAR_MODEL = {"iterations": 100}  # the linear-model figures train a logistic regression

PAPER = Paper(
    KEY, "Mukhoti et al. 2020 — Calibrating deep neural networks using focal loss", order=3,
    theory={
        f"{KEY}_fig4a_gradient_ratio": TheoryFigure(
            KEY, "Fig 4a and Prop 2: g(p, γ) and γ*(p0)", "gradient_ratio_figure"),
        f"{KEY}_fig6_binary_optimum": TheoryFigure(
            KEY, "Fig 6: optimal p̂ against q for a binary problem, cross-entropy and focal loss",
            "binary_optimum_figure", {"n_points": 401}, {"n_points": 41}),
        f"{KEY}_fig7_linear_model_norms": TheoryFigure(
            KEY, "Fig 7 (App. B): logit and weight norms of a logistic regression trained with cross-entropy "
            "and focal loss γ = 1", "linear_model_norms_figure", coarse=_COARSE_LINEAR_MODEL),
        f"{KEY}_fig8_linear_model_mistakes": TheoryFigure(
            KEY, "Fig 8 (App. B): confidence of the linear model's mistakes and its decision boundaries, "
            "cross-entropy vs focal loss", "linear_model_mistakes_figure", coarse=_COARSE_LINEAR_MODEL),
    },
    reference_model="ResNet 50",  # the model of Figs 1-3 and of every data set in Tables 1-2
)
