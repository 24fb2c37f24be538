"""What the Code Review's model review would cost: the size of one review call (the run's
stable system prefix, which is cached after the first call, plus ``code_review.j2`` with a
node's program) per task, from the fault ablation's finished runs, priced at the cheap model's
list prices (``llm.prices``; tokens as characters / ``CHARS_PER_TOKEN``, the engine's
conservative budget estimate). A pass is taken to answer 150 tokens, a revision 150 plus the
program.

Usage (from the repository root, after ``experiments/ablation_faults.py --review-rates 0 0.5``)::

    .venv/bin/python experiments/review_cost.py --runs /tmp/mcgs-faults/runs
"""
import argparse
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from ablation import HOUSE, MLEBENCH_TASKS  # noqa: E402

from mcgs.operators import OperatorContext, build_request

from mcgs.branches import Expansion
from mcgs.coders.anthropic import CHARS_PER_TOKEN, AnthropicCoder, prompt_environment
from mcgs.coders.recipe import RecipeCoder
from mcgs.node import Operator
from mcgs.search import open_search


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=Path, default=Path("/tmp/mcgs-faults/runs"))
    runs = ap.parse_args().runs
    for task in (*MLEBENCH_TASKS, HOUSE):  # the fault ablation's tasks
        search = open_search(runs / f"{task}-mcgs-fault0.4-seed0-review0.5")
        coder = AnthropicCoder(search.settings, fallback=RecipeCoder())
        price = search.settings.llm.prices[search.settings.llm.cheap_model]
        g = search.graph()
        nodes = [n for n in search.nodes() if n.parent_id is not None and n.operator.value != "ensemble" and n.code]
        root = next(n for n in search.nodes() if n.parent_id is None)
        ctx = OperatorContext(graph=g, task=search.task, profile=search.profile, settings=search.settings, seed=0, seq=99)
        req = build_request(ctx, Expansion(parent_id=root.id, operator=Operator.DRAFT, reason="cost"))
        system = coder.system_prompt(req)
        users = [prompt_environment().get_template("code_review.j2").render(code=n.code, timeout_s=req.per_run_timeout_s, note=None) for n in nodes]
        sys_tok = len(system) / CHARS_PER_TOKEN
        user_tok = statistics.median(len(u) for u in users) / CHARS_PER_TOKEN
        code_tok = statistics.median(len(n.code) for n in nodes) / CHARS_PER_TOKEN
        # the prefix is read from the cache after a run's first call
        per_pass = (sys_tok * price.cache_read + user_tok * price.input + 150 * price.output) / 1e6
        per_revise = (sys_tok * price.cache_read + user_tok * price.input + (code_tok + 150) * price.output) / 1e6
        print(f"{task}: system {sys_tok:.0f} tok, review part {user_tok:.0f} tok, program {code_tok:.0f} tok; "
              f"pass ${per_pass:.4f}, revise ${per_revise:.4f} ({search.settings.llm.cheap_model}: {price})")


if __name__ == "__main__":
    main()
