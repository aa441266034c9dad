"""Run every benchmark: ``python -m bench [--quick] [topic ...]`` (``make bench``).

``python -m bench report`` runs none: it writes bench/RESULTS.md from the recorded results
(:mod:`bench.report`)."""

import argparse
import importlib
import pkgutil
import time

import bench


def main() -> None:
    topics = sorted(m.name[len("bench_"):] for m in pkgutil.iter_modules(bench.__path__) if m.name.startswith("bench_"))
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("topics", nargs="*", help=f"benchmarks to run (default: all of {', '.join(topics)})")
    parser.add_argument("--quick", action="store_true", help="smaller sizes, for a smoke run")
    args = parser.parse_args()
    if args.topics == ["report"]:
        from bench import report

        report.main()
        return
    unknown = sorted(set(args.topics) - set(topics))
    if unknown:
        parser.error(f"unknown benchmark(s) {unknown}; available: {topics}")
    for topic in args.topics or topics:
        print(f"\n=== bench_{topic} ===", flush=True)
        start = time.perf_counter()
        importlib.import_module(f"bench.bench_{topic}").main(quick=args.quick)
        print(f"(bench_{topic} took {time.perf_counter() - start:.1f} s)", flush=True)


if __name__ == "__main__":
    main()
