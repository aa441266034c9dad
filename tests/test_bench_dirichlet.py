"""``python -m bench.bench_dirichlet``'s command line: which draws of the five inputs it tables."""

from __future__ import annotations

import pytest

from bench.bench_dirichlet import _seeds


def test_seeds_default_to_the_benchmark_draw_and_take_a_list():
    assert _seeds(["bench_dirichlet.py"]) == (0,)
    assert _seeds(["bench_dirichlet.py", "--no-baseline", "--seeds", "0,1,2"]) == (0, 1, 2)
    assert _seeds(["bench_dirichlet.py", "--seeds", "7"]) == (7,)


@pytest.mark.parametrize("argv", [["--seeds"], ["--seeds", "1,two"], ["--seeds", "-1"], ["--seeds", "--quick"]])
def test_seeds_refuse_what_is_not_a_list_of_seeds(argv):
    with pytest.raises(SystemExit, match="--seeds takes a comma-separated list"):
        _seeds(["bench_dirichlet.py", *argv])
