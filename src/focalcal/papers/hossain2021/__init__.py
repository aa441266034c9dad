"""hossain2021 — Hossain, Betts & Paplinski 2021, "Dual focal loss to address class imbalance in
semantic segmentation": CE, WCE, DCE, FL, GDL and DFL on imbalanced segmentation sets, scored by
IoU and Hausdorff distance over cross-validation folds."""

from focalcal import catalog

PAPER = catalog.paper_of_package(__name__)  # its entry in catalog.PAPERS
KEY = PAPER.key
