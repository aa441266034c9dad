"""Reading and writing results files so that damage is caught and explained.

:mod:`~focalcal.files.artefacts` writes atomically with a checksum sidecar
(:mod:`~focalcal.files.sidecar`) and reads a file only after checking it against its sidecar;
:mod:`~focalcal.files.npz` checks an archive's array headers before allocating;
:mod:`~focalcal.files.output_folder` stages a command's output folder and replaces it whole;
:mod:`~focalcal.files.remake` says which command re-makes a damaged results file. Torch-free.
"""
