"""What hossain2021 calls our segmentation runs: the published (data set, model) each stands for.

Its dataset and model names (Tables 2-3) are the catalog's; an image/mask folder is matched by
its folder name; any other model is compared with the paper's reference model (``PAPER``).
"""

from __future__ import annotations

from focalcal import catalog
from focalcal.core.spec_facts import PaperSetting, compared_setting, published_name
from focalcal.papers.hossain2021 import PAPER

_FOLDERS = (("mri", "MRI prostate"), ("trus", "TRUS prostate"), ("cityscape", "Cityscape"))
TABLE_OF_MODEL = {"DeepLabV3+": 2, "VGG19 FCN": 3}  # the paper's table of each model
# catalog loss -> the name Tables 2-3 print
LOSS_NAMES = {"cross_entropy": "CE", "weighted_cross_entropy": "WCE", "dual_cross_entropy": "DCE", "focal": "FL",
              "generalized_dice": "GDL", "dual_focal": "DFL"}


def hossain_setting(dataset_spec: dict, model_spec: dict) -> PaperSetting:
    """Which (dataset, model) of the paper a segmentation run stands for."""
    name = dataset_spec.get("name")
    if name == "segmentation_folder":
        folder = str(dataset_spec.get("folder", "")).lower()
        dataset, stand_in = next((paper for key, paper in _FOLDERS if key in folder), None), False
    else:
        dataset, stand_in = published_name(catalog.DATASETS, name, "segmentation")
    model, _ = published_name(catalog.MODELS, model_spec.get("name"), "segmentation")
    return compared_setting(dataset, stand_in, model, PAPER.reference_model)
