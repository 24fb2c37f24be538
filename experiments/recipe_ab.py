"""Recipe templates of a git revision against the working tree's, or a feature block off against
on: one default draft per task and model.

For each task of the public suite (docs/results/suite.md) and each model, the recipe coder's
default config is rendered twice: with the recipe templates of a git revision (``--before``) and
with the working tree's, or (``--feature FLAG``) with the working tree's templates and the feature
block FLAG switched off, then on. Both programs run in the sandbox with the same limits, one after the
other; the engine scores each on its OOF rows and the held-out answers grade its submission. The
table reports CV score, held-out score and run time of both. Used for early stopping inside the
training fold (docs/results/early_stopping.md) and for the refit on all of a fold's rows after it
(docs/results/fold_refit.md), and for target encoding inside the folds
(docs/results/target_encoding.md). With ``--scale-params`` the two sides are a model's base
defaults and its defaults for the task's rows (the entry's ``scale_params``,
docs/results/scale_params.md).

Usage (from the repository root; the suite built by experiments/suite.py)::

    .venv/bin/python experiments/recipe_ab.py --suite /tmp/mcgs-suite --before 0a1b2c3 \\
        --labels "fixed rounds,early stopping" --title "Early stopping inside the training fold against fixed rounds" \\
        --tasks hmda_deny,computer_prices --models lightgbm --work /tmp/mcgs-ab --report docs/results/early_stopping.md
    .venv/bin/python experiments/recipe_ab.py --suite /tmp/mcgs-suite --feature target_encoding \\
        --labels "without,with" --tasks movielens_rating --work /tmp/mcgs-ab
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _templates_at(revision: str, into: Path) -> Path:
    """The recipe templates of ``revision``, extracted under ``into``."""
    archive = subprocess.run(["git", "-C", str(REPO), "archive", revision, "knowledge_base/recipes"], check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return into / "knowledge_base" / "recipes"


def _render(config: dict, profile: dict, recipes: Path | None) -> str:
    """The program of ``config``, with the templates in ``recipes`` (None: the working tree's)."""
    import jinja2

    import mcgs.coders.recipe_config as recipe_config
    from mcgs.knowledge_base import template_environment

    original = recipe_config.template_environment
    if recipes is not None:
        env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(recipes)), undefined=jinja2.StrictUndefined,
                                 keep_trailing_newline=True, trim_blocks=True, lstrip_blocks=True)
        recipe_config.template_environment = lambda: env
    try:
        code, _ = recipe_config.render_program(config, title="recipe A/B experiment", plan="default config", profile=profile)
    finally:
        recipe_config.template_environment = original if recipes is not None else template_environment
    return code


def run_one(task_dir: Path, answers_dir: Path, model: str, recipes: Path | None, work: Path, timeout_s: float,
            feature: tuple[str, bool] | None = None, base_params: bool = False) -> dict:
    """Run the default config of ``model`` on one task in the sandbox (with ``feature`` = (flag,
    on) set in it; with ``base_params``, the entry's defaults without its ``scale_params``); CV
    and held-out scores."""
    from mcgs.coders.recipe_config import default_config
    from mcgs.contract import prepare_run_input, prepare_workspace
    from mcgs.evaluation import OutputError, TaskLabels, evaluate_workspace
    from mcgs.mlebench.bench import grade_suite_submission
    from mcgs.profile import profile_task
    from mcgs.sandbox import SandboxLimits, resolve_isolation, run_program
    from mcgs.task import load_task

    spec = load_task(task_dir)
    profile = profile_task(spec)
    config = default_config(f"model.{model}", profile) | {"seed": 0}
    if base_params:
        from mcgs.knowledge_base import get_entry

        config["params"] = dict(get_entry(f"model.{model}").recipe.params)
    if feature is not None:
        config["features"][feature[0]] = feature[1]
    code = _render(config, profile, recipes)
    inp = prepare_run_input(spec, work / "run")
    ws = prepare_workspace(inp, work / "ws", code)
    limits = SandboxLimits(timeout_s=timeout_s, memory_mb=8192, cpu_threads=2, isolation=resolve_isolation("auto"))
    start = time.monotonic()
    result = run_program(ws, "solution.py", limits)
    wall = time.monotonic() - start
    row = {"outcome": result.outcome.value, "runtime_s": round(wall, 1), "cv": None, "held_out": None}
    try:
        row["cv"] = round(evaluate_workspace(TaskLabels.load(spec, inp / "folds.csv"), ws).score, 5)
        row["held_out"] = grade_suite_submission(answers_dir.parent, task_dir.name, ws / "submission" / "submission.csv")["score"]
    except OutputError as exc:
        row["error"] = str(exc)[:300]
    return row


def render_report(rows: list[dict], args) -> str:
    """The Markdown page: per task, both variants' CV and held-out scores, the held-out ratio
    (> 1: the working tree's better, either metric direction) and run times; then the totals."""
    from mcgs.task import load_task

    a, b = args.labels.split(",")
    variants = (f"with the working tree's templates and the feature block `{args.feature}` off ({a}), then on ({b})"
                if args.feature else f"with the entry's base defaults ({a}) and its defaults for the task's rows, `scale_params` ({b})"
                if args.scale_params else f"with the recipe templates of {args.before} ({a}) and with the working tree's ({b})")
    lines = [f"| task | model | metric | {a}: CV / held-out | {b}: CV / held-out | held-out ratio (> 1 = {b} better) "
             f"| run time (s): {a} / {b} |", "|---|---|---|---|---|---|---|"]
    better = worse = 0
    times = [0.0, 0.0]
    for old, new in zip(rows[0::2], rows[1::2]):
        spec = load_task(args.suite / "tasks" / old["task"])
        if old["held_out"] is None or new["held_out"] is None:
            ratio = None
        else:
            ratio = new["held_out"] / old["held_out"] if spec.higher_is_better else old["held_out"] / new["held_out"]
            better, worse = better + (ratio > 1), worse + (ratio < 1)
        times = [times[0] + old["runtime_s"], times[1] + new["runtime_s"]]
        lines.append(f"| {old['task']} | {old['model']} | {spec.metric} | {old['cv']} / {old['held_out']} | {new['cv']} / {new['held_out']} "
                     f"| {'-' if ratio is None else f'{ratio:.4f}'} | {old['runtime_s']} / {new['runtime_s']} |")
    return "\n".join([
        f"# {args.title}", "",
        f"The recipe coder's default config of each model on each task, rendered {variants}. Both run in the sandbox on 2 cores, one after the other; CV is the engine's score "
        "on the OOF rows, held-out is graded on the suite's answers.", "",
        *lines, "",
        f"Held-out score better with {b} on {better} of {better + worse} tasks, worse on {worse}; total run time "
        f"{times[1]:.1f} s against {times[0]:.1f} s ({times[1] / max(times[0], 1e-9):.2f}x).", "",
        f"Command: `python experiments/recipe_ab.py --suite SUITE "
        f"{f'--feature {args.feature}' if args.feature else '--scale-params' if args.scale_params else f'--before {args.before}'} --labels \"{args.labels}\" "
        f"--title \"{args.title}\" --tasks {args.tasks} --models {args.models} --work WORK --report {args.report}`",
    ]) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--suite", type=Path, required=True, help="A suite built by experiments/suite.py.")
    which = parser.add_mutually_exclusive_group(required=True)
    which.add_argument("--before", help="Git revision whose recipe templates are compared with the working tree's.")
    which.add_argument("--feature", help="A feature block's config flag (e.g. target_encoding): off against on, the working tree's templates.")
    which.add_argument("--scale-params", action="store_true", help="A model's base defaults against its defaults for the task's rows (scale_params).")
    parser.add_argument("--labels", default="before,after", help="Names of the two variants, the revision's first, comma-separated.")
    parser.add_argument("--title", default="Recipe templates: a revision against the working tree", help="The report's title.")
    parser.add_argument("--tasks", required=True, help="Comma-separated suite task names.")
    parser.add_argument("--models", default="lightgbm", help="Comma-separated: lightgbm, catboost, hist_gradient_boosting.")
    parser.add_argument("--work", type=Path, required=True)
    parser.add_argument("--timeout", type=float, default=1800.0)
    parser.add_argument("--report", type=Path)
    args = parser.parse_args(argv)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        before = _templates_at(args.before, Path(tmp)) if args.before else None
        if args.before:
            sides = ((before, None, False), (None, None, False))
        elif args.scale_params:
            sides = ((None, None, True), (None, None, False))
        else:
            sides = ((None, (args.feature, False), False), (None, (args.feature, True), False))
        for task in args.tasks.split(","):
            for model in args.models.split(","):
                for label, (recipes, feature, base_params) in zip(args.labels.split(","), sides):
                    work = args.work / task / model / label.replace(" ", "_")
                    row = run_one(args.suite / "tasks" / task, args.suite / "answers", model, recipes, work, args.timeout, feature, base_params)
                    row.update(task=task, model=model, variant=label)
                    print(json.dumps(row), flush=True)
                    rows.append(row)
    if args.report:
        args.report.write_text(render_report(rows, args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
