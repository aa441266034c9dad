"""Shared test set-up.

pytest-xdist runs two workers on this 2-core machine; each torch process would otherwise
start one thread per core and the workers would thrash each other (observed: 20 s → 260 s).
"""

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import torch  # noqa: E402

torch.set_num_threads(1)
