"""The command line, ``focalcal`` (:mod:`~focalcal.commands.cli`), and what only its commands do.

``focalcal calibrate`` on a model's own logits: :mod:`~focalcal.commands.calibrate_command` runs
it, :mod:`~focalcal.commands.calibrator_choice` says which calibrators it fits,
:mod:`~focalcal.commands.shared_work` shares them between two processes and
:mod:`~focalcal.commands.calibrate_page` renders its page. ``focalcal verify`` is
:mod:`~focalcal.commands.verify`; :mod:`~focalcal.commands.allocator` tunes the allocator of a
command's own process. The top floor: it may import any module of the library, and none imports it.
"""
