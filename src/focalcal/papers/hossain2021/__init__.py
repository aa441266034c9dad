"""hossain2021 — Hossain, Betts & Paplinski 2021, "Dual focal loss to address class imbalance in
semantic segmentation": CE, WCE, DCE, FL, GDL and DFL on imbalanced segmentation sets, scored by
IoU and Hausdorff distance over cross-validation folds."""

from focalcal.papers import Paper, TheoryFigure

KEY = "hossain2021"

PAPER = Paper(
    KEY, "Hossain et al. 2021 — Dual focal loss for class-imbalanced segmentation", order=4,
    theory={
        f"{KEY}_fig1_loss_derivatives": TheoryFigure(
            KEY, "Fig 1: derivatives of CE, DCE, FL and DFL for y = 1 and y = 0", "loss_derivatives_figure"),
    },
    needs_study_table=False,  # its segmentation runs are scored on their test folds, never calibrated
    reference_model="DeepLabV3+",  # Table 2's architecture
)
