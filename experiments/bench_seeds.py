"""One comparison table from `mcgs bench` folders run with different seeds (issue 33's acceptance:
one seed per task, three on the tasks below 10 000 rows).

Each (task, competitor) pair's score is the mean over the seeds that ran it
(:func:`mcgs.mlebench.bench.combine_seeds`); the table then gives every score's ratio to the
task's best, mcgs against FLAML and against the better AutoGluon preset (ahead on how many, how
far behind where not), and the mean normalised score (0 = LightGBM defaults, 1 = the best).

Usage (from the repository root)::

    .venv/bin/python experiments/bench_seeds.py docs/results/suite_bench_10min \\
        docs/results/suite_bench_10min_seed1 docs/results/suite_bench_10min_seed2 \\
        --report docs/results/suite_bench_10min_seeds.md
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    from mcgs.mlebench.bench import combine_seeds, render_bench_markdown

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("bench_dirs", nargs="+", type=Path, help="--out folders of `mcgs bench` runs (one per seed)")
    ap.add_argument("--report", type=Path, help="write the table here (Markdown) and its data beside it (.json)")
    args = ap.parse_args(argv)
    try:
        summary = combine_seeds(args.bench_dirs)
    except (ValueError, OSError, KeyError, json.JSONDecodeError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    command = "python experiments/bench_seeds.py " + " ".join(str(d) for d in args.bench_dirs)
    summary.update(date=dt.datetime.now().isoformat(timespec="seconds"), command=command,
                   machine="the bench folders' machine (their bench.md)")
    text = render_bench_markdown(summary)
    if args.report:
        args.report.write_text(text)
        args.report.with_suffix(".json").write_text(json.dumps(summary, indent=2, default=str))
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
