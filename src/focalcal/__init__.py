"""focalcal: focal-loss calibration research library.

Submodules are imported lazily so that ``import focalcal.metrics`` does not pay for
torch model code it does not use.
"""

__version__ = "0.1.0"
