"""MLE-bench campaigns: graded reports per run, the aggregate MLE-bench reports, resumption."""

from __future__ import annotations

import json
import math

import pytest

from mcgs.mlebench import MLEBenchError
from mcgs.mlebench.campaign import CampaignSpec, aggregate_reports, render_campaign_markdown, run_campaign
from mcgs.search import open_search


def _rep(comp, seed, score, medal=None, valid=True, above=False, cost=0.0):
    return {
        "competition_id": comp, "seed": seed, "score": score if valid else None, "valid_submission": valid,
        "gold_medal": medal == "gold", "silver_medal": medal == "silver", "bronze_medal": medal == "bronze",
        "any_medal": medal is not None, "above_median": above, "median_threshold": 0.8, "is_lower_better": False,
        "wall_s": 600.0, "llm_cost_usd": cost, "best_so_far": [[60.0, score], [600.0, score]],
    }


def test_aggregate_counts_medals_shares_and_the_standard_error_over_seeds():
    reps = [_rep("a", 0, 0.80, "gold", above=True), _rep("a", 1, 0.84, "bronze", above=True), _rep("a", 2, 0.0, valid=False),
            _rep("b", 0, 0.5, cost=0.2), _rep("b", 1, 0.7, "silver", above=True, cost=0.4)]
    agg = aggregate_reports(reps)
    o = agg["overall"]
    assert (o["runs"], o["gold"], o["silver"], o["bronze"]) == (5, 1, 1, 1)
    assert o["any_medal_pct"] == 60.0 and o["valid_submission_pct"] == 80.0 and o["above_median_pct"] == 60.0
    assert o["mean_llm_cost_usd"] == pytest.approx(0.12)
    a = agg["competitions"]["a"]
    assert a["score_mean"] == pytest.approx(0.82)  # the invalid run is out of the mean
    assert a["score_se"] == pytest.approx(math.sqrt(0.0008) / math.sqrt(2))
    assert a["score_median"] == pytest.approx(0.82) and agg["competitions"]["b"]["score_median"] == pytest.approx(0.6)
    assert a["valid_submission_pct"] == pytest.approx(66.7)
    reps[0]["median_threshold"] = reps[1]["median_threshold"] = 0.5995950000000001  # as MLE-bench's CSV parses
    text = render_campaign_markdown(aggregate_reports(reps), reps)
    assert "| a | 3 | 0.82 ± 0.02 | 0.82 | 0.599595 | 66.7 % | 1/0/1 | 66.7 % |" in text


def test_an_unprepared_competition_without_raw_data_names_the_fix(tmp_path):
    spec = CampaignSpec(competitions=("spaceship-titanic",), seeds=(0,), time_budget_s=60, data_dir=tmp_path / "data", out_dir=tmp_path / "c")
    with pytest.raises(MLEBenchError, match="mcgs mlebench prepare spaceship-titanic"):
        run_campaign(spec, say=lambda m: None)
    with pytest.raises(MLEBenchError, match="unknown"):
        run_campaign(CampaignSpec(("no-such-competition",), (0,), 60, tmp_path / "data", tmp_path / "c"), say=lambda m: None)


@pytest.mark.slow
@pytest.mark.realdata
def test_campaign_grades_each_run_and_a_rerun_skips_finished_pairs(shared_data, tmp_path):
    spec = CampaignSpec(
        competitions=("spaceship-titanic",), seeds=(0, 1), time_budget_s=300, data_dir=tmp_path / "data", out_dir=tmp_path / "camp",
        raw_root=shared_data, settings={"max_nodes": 1, "num_drafts": 1, "plan_candidates": 0, "coder": "recipe", "ensemble": False,
                  "recipe_models": ["model.lightgbm"]},
    )
    said: list[str] = []
    partial: list[str] = []

    def say(message: str) -> None:  # the report as it stands after the first graded run
        said.append(message)
        if "1 of 2 runs graded" in message:
            partial.append((tmp_path / "camp" / "campaign.md").read_text())
            partial.append(json.loads((tmp_path / "camp" / "campaign.json").read_text()))

    result = run_campaign(spec, say=say)
    assert [(r["competition_id"], r["seed"]) for r in result["reports"]] == [("spaceship-titanic", 0), ("spaceship-titanic", 1)]
    assert len(partial) == 2 and "Partial: 1 of 2 runs graded" in partial[0] and "| spaceship-titanic | 0 |" in partial[0]
    assert (partial[1]["graded_runs"], partial[1]["planned_runs"], [r["seed"] for r in partial[1]["reports"]]) == (1, 2, [0])
    for r in result["reports"]:
        assert r["valid_submission"] and 0.7 < r["score"] < 0.85 and r["nodes"] >= 1 and r["wall_s"] > 0
        assert {"gold_threshold", "median_threshold", "any_medal", "submission_path", "created_at"} <= set(r)
    saved = json.loads((tmp_path / "camp" / "reports" / "spaceship-titanic-seed0.json").read_text())
    assert saved["score"] == result["reports"][0]["score"]
    assert result["overall"]["valid_submission_pct"] == 100.0
    for png in ("spaceship-titanic.png", "campaign.png"):
        assert (tmp_path / "camp" / "plots" / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert len(result["reports"][0]["best_so_far"]) >= 1  # the draft finished
    drafts = [n for n in open_search(tmp_path / "camp" / "runs" / "spaceship-titanic-seed0").nodes() if n.parent_id is not None]
    assert drafts and all("model.lightgbm" in n.knowledge_ids for n in drafts)  # the campaign's settings reached the coder
    md = (tmp_path / "camp" / "campaign.md").read_text()
    assert "| spaceship-titanic | 0 |" in md and "valid submission" in md and "Partial" not in md
    assert "Command: `mcgs mlebench campaign --competitions spaceship-titanic --seeds 0,1 --time-budget 300s" in md
    assert result["reports"][0]["commit"] and "Engine commit(s): " + result["reports"][0]["commit"] in md

    # rerun: graded pairs are skipped; a lost report is regraded from the finished run
    (tmp_path / "camp" / "reports" / "spaceship-titanic-seed1.json").unlink()
    said.clear()
    again = run_campaign(spec, say=said.append)
    assert not any("searching" in m for m in said)
    assert [r["score"] for r in again["reports"]] == [r["score"] for r in result["reports"]]


def test_engine_commit_names_the_checkout_and_flags_uncommitted_engine_changes(tmp_path):
    import subprocess

    from mcgs import __version__
    from mcgs.mlebench.campaign import engine_commit

    assert engine_commit(tmp_path) == __version__  # not a git checkout
    git = lambda *a: subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *a], cwd=tmp_path, check=True, capture_output=True, text=True)  # noqa: E731
    git("init", "-q")
    (tmp_path / "mcgs").mkdir()
    (tmp_path / "mcgs" / "search.py").write_text("A = 1\n")
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "campaign.md").write_text("partial\n")
    git("add", ".")
    git("commit", "-qm", "x")
    rev = git("rev-parse", "--short", "HEAD").stdout.strip()
    assert engine_commit(tmp_path) == rev
    (tmp_path / "docs" / "campaign.md").write_text("18 of 18\n")  # results: not the engine
    assert engine_commit(tmp_path) == rev
    (tmp_path / "mcgs" / "search.py").write_text("A = 2\n")
    assert engine_commit(tmp_path) == f"{rev}+modified"
    (tmp_path / ".venv" / "lib").mkdir(parents=True)  # an installed copy inside someone's repository
    assert engine_commit(tmp_path / ".venv" / "lib") == __version__


def test_a_stopped_campaign_says_what_is_kept_and_how_to_continue(tmp_path, monkeypatch):
    from typer.testing import CliRunner

    import mcgs.mlebench.campaign as campaign
    from mcgs.cli import app

    def stopped(spec, say):
        raise KeyboardInterrupt("signal 15")

    monkeypatch.setattr(campaign, "run_campaign", stopped)
    res = CliRunner().invoke(app, ["mlebench", "campaign", "--competitions", "spaceship-titanic", "--seeds", "0", "--data", str(tmp_path),
                                   "--out", str(tmp_path / "c")], env={"COLUMNS": "200"})
    assert res.exit_code == 130, res.output
    assert "stopped. The graded runs are saved and reported in" in res.output and "campaign.md" in res.output


def test_a_failed_run_is_said_and_the_campaign_goes_on_with_the_next(tmp_path, monkeypatch):
    from typer.testing import CliRunner

    import mcgs.mlebench.campaign as campaign
    from mcgs.cli import app

    def run_one(comp, seed, spec, say):
        if comp == "spaceship-titanic":
            raise ValueError("n_splits=5 cannot be greater than the number of members in each class")
        return _rep(comp, seed, 0.9, medal="gold", above=True)

    monkeypatch.setattr(campaign, "ensure_prepared", lambda *a: None)
    monkeypatch.setattr(campaign, "_run_one", run_one)
    args = ["mlebench", "campaign", "--competitions", "spaceship-titanic,random-acts-of-pizza", "--seeds", "0", "--data", str(tmp_path),
            "--out", str(tmp_path / "c")]
    res = CliRunner().invoke(app, args, env={"COLUMNS": "200"})
    assert res.exit_code == 1, res.output
    assert "spaceship-titanic seed 0: FAILED (ValueError: n_splits=5" in res.output and "1 run(s) failed" in res.output
    assert not (tmp_path / "c" / "reports" / "spaceship-titanic-seed0.json").exists()
    assert json.loads((tmp_path / "c" / "reports" / "random-acts-of-pizza-seed0.json").read_text())["gold_medal"]
    assert "Partial: 1 of 2" in (tmp_path / "c" / "campaign.md").read_text()
    monkeypatch.setattr(campaign, "_run_one", lambda comp, seed, spec, say: _rep(comp, seed, 0.8))  # fixed: a rerun runs only the failed one
    again = CliRunner().invoke(app, args, env={"COLUMNS": "200"})
    assert again.exit_code == 0, again.output
    assert "Partial" not in (tmp_path / "c" / "campaign.md").read_text()
