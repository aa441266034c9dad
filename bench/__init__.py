"""Benchmarks: each bench_<topic>.py prints timings as ratios against a baseline run in the same script."""
