"""komisarenko2024 — Komisarenko et al. 2024, "Improving calibration by relating focal loss,
temperature scaling, and properness": the focal calibration map, its closest temperature and
focal temperature scaling."""

from focalcal.papers import Paper, TheoryFigure

KEY = "komisarenko2024"

# The closest-temperature searches (K >= 3) are the costly part; coarse grids use fewer γ and
# coarser logit steps.
_COARSE_GAMMAS = [0.0, 2.0, 4.0, 6.0, 8.0, 10.0]
_COARSE_SIMPLEX = {"logit_step": 0.1}

PAPER = Paper(
    KEY, "Komisarenko et al. 2024 — Focal calibration map and focal temperature scaling", order=2,
    theory={
        f"{KEY}_fig1_focal_calibration_map": TheoryFigure(
            KEY, "Fig 1: the proper part of the focal loss and the binary focal calibration map",
            "focal_calibration_map_figure"),
        f"{KEY}_fig2_closest_temperature_k2": TheoryFigure(
            KEY, "Fig 2: temperature closest to the focal map against γ, K = 2 (linear fit and max error)",
            "closest_temperature_figure", {"num_classes": 2},
            {"gammas": [0.0, 1.0, 2.0, 4.0, 6.0, 8.0, 10.0], "logit_step": 0.01}),
        f"{KEY}_fig6_closest_temperature_k3": TheoryFigure(
            KEY, "Fig 6: temperature closest to the focal map against γ, K = 3",
            "closest_temperature_figure", {"num_classes": 3}, {"gammas": _COARSE_GAMMAS, "logit_step": 0.1}),
        f"{KEY}_closest_temperature_k4": TheoryFigure(
            KEY, "§3.3: temperature closest to the focal map against γ, K = 4",
            "closest_temperature_figure", {"num_classes": 4}, {"gammas": _COARSE_GAMMAS, "logit_step": 0.25}),
        f"{KEY}_fig3_temperature_bounds": TheoryFigure(
            KEY, "Fig 3: Prop 3's temperature bounds against the numerical ones", "temperature_bounds_figure"),
        f"{KEY}_fig4_conditional_risk": TheoryFigure(
            KEY, "Fig 4: conditional-risk isolines on the 3-class simplex", "conditional_risk_isolines_figure"),
        f"{KEY}_fig5_calibration_arrows": TheoryFigure(
            KEY, "Fig 5: arrow maps of the focal map and of its closest temperature scaling",
            "calibration_arrows_figure", coarse=_COARSE_SIMPLEX),
        f"{KEY}_fig7_calibration_difference": TheoryFigure(
            KEY, "Fig 7: heat map of temperature scaling minus focal calibration",
            "calibration_difference_figure", coarse=_COARSE_SIMPLEX),
    },
    reference_model="ResNet 50",  # the model of every row of Table 1
)
