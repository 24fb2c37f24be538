"""The experience store (mcgs.experience): a finished run adds what it learned, a run on similar
data starts from it, nothing of the data's rows or labels is kept, a run never learns from its own
data unless asked, and a broken store leaves the run working."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

import mcgs
from mcgs.coders.recipe import RecipeCoder
from mcgs.demo import build_demo_task
from mcgs.experience import Experience, ExperienceStore, meta_features, recall, store_url
from mcgs.node import Operator

FAST = ("model.logistic_regression", "model.knn", "model.random_forest")


def _task(folder, seed):
    """The demo task (split by ``seed``) with two columns whose values are easy to find in a
    file: a category of made-up words and a number with ten significant digits."""
    task = build_demo_task(folder, seed=seed)
    rng = np.random.default_rng(seed)
    for name in ("train.csv", "test.csv"):
        df = pd.read_csv(task / name)
        df["token"] = [f"zqxvord{int(k)}" for k in rng.integers(0, 5, len(df))]
        df["signal"] = np.round(31.4159 + rng.random(len(df)) * 1e-3, 10)
        df.to_csv(task / name, index=False)
    return task


def _run(tmp_path, name, seed, store, **kw):
    said: list[str] = []
    search = mcgs.create_search(_task(tmp_path / f"task-{name}", seed), run_dir=tmp_path / name, coder=RecipeCoder(models=FAST),
                                ensemble=kw.pop("ensemble", False), plan_candidates=0, time_budget_s=600, max_nodes=kw.pop("max_nodes", 4),
                                experience_store=str(store), **kw)
    search.say = said.append
    search.run()
    return search, said


@pytest.fixture(scope="module")
def first(tmp_path_factory):
    """A finished four-node run of the task (split 0) that added itself to a store:
    ``(search, store, said)``."""
    tmp = tmp_path_factory.mktemp("experience")
    store = tmp / "experience.db"
    search, said = _run(tmp, "first", 0, store)
    return search, store, said


def _copy(store, tmp_path):
    """A copy of ``store`` for one test to change."""
    import shutil

    dest = tmp_path / "experience.db"
    shutil.copyfile(store, dest)
    return dest


def _values(task) -> set[str]:
    """Every text cell, class name and ten-digit number of the task's tables, as text."""
    out = set()
    for name in ("train.csv", "test.csv"):
        df = pd.read_csv(task / name)
        out |= set(df["token"].astype(str)) | {repr(float(v)) for v in df["signal"]}
    return out | {"malignant", "benign"}


@pytest.mark.slow
def test_a_run_on_similar_data_drafts_from_what_an_earlier_run_learned_and_the_store_holds_no_rows(first, tmp_path):
    first, store, said = first
    total = sum(n.parent_id is not None for n in first.nodes())
    assert any(f"of this run's {total} node(s) were added to" in s for s in said), said
    runs = ExperienceStore(store_url(str(store))).runs()
    assert len(runs) == 1 and runs[0]["features"] == meta_features(first.profile)
    # nothing of the rows or labels: every cell value, class name and column name is absent from the file
    blob = store.read_bytes() + b"".join(p.read_bytes() for p in store.parent.glob("experience.db-*"))
    found = [v for v in _values(first.task.data_dir) | {"token", "signal", "mean_radius"} if v.encode() in blob]
    assert not found
    store = _copy(store, tmp_path)

    # a run on other data of the same shape (another split): the drafts follow the first run's ranking
    second, said = _run(tmp_path, "second", 1, store)
    exp = second.experience
    assert [r["source"] for r in exp.runs] == [str(first.run_dir.resolve())]
    best_family = next(iter(exp.family_ranks))
    first_valid = [n for n in first.nodes() if n.is_valid and n.operator is not Operator.ENSEMBLE]
    winner = max(first_valid, key=lambda n: n.score)
    assert best_family == winner.config["model"]
    draft = next(n for n in second.nodes() if n.operator is Operator.DRAFT)
    assert draft.config["model"] == best_family
    assert {k: draft.config["params"][k] for k in exp.configs[best_family]["params"]} == exp.configs[best_family]["params"]
    assert "on similar data" in draft.plan
    stored = json.loads((tmp_path / "second" / "experience.json").read_text())
    assert stored["store"] == str(store) and stored["experience"]["runs"] == exp.runs
    status = subprocess.run([sys.executable, "-m", "mcgs", "status", str(tmp_path / "second")], capture_output=True, text=True, timeout=120)
    assert "experience: started from 1 earlier run(s) on similar data" in status.stdout
    # the LLM coder's prompt says it too, in its stable prefix
    from mcgs.coders import CoderRequest

    req = CoderRequest(operator=Operator.DRAFT, task=second.task, profile=second.profile, experience=exp)
    assert "What worked on similar data" in _prefix(req) and best_family in _prefix(req)


def _prefix(req) -> str:
    from mcgs.coders.anthropic import prompt_environment

    return prompt_environment().get_template("_prefix.j2").render(contract_version="1", task=req.task, description="", profile_text="{}",
                                                                knowledge=[], train_only_columns=[], experience=req.experience.summary())


def test_a_run_never_learns_from_its_own_data_unless_asked(first, tmp_path):
    first, store, _ = first
    store = _copy(store, tmp_path)
    again, _ = _run(tmp_path, "again", 0, store, max_nodes=2)  # the same data: the same fingerprint
    assert again.run_record.data_fingerprint == first.run_record.data_fingerprint
    assert again.experience.empty
    status = subprocess.run([sys.executable, "-m", "mcgs", "status", str(tmp_path / "again")], capture_output=True, text=True, timeout=120)
    assert "experience: none on similar data" in status.stdout and "when the run began" in " ".join(status.stdout.split())
    st = ExperienceStore(store_url(str(store)))
    assert recall(st, first.profile, first.run_record.data_fingerprint).empty
    assert len(recall(st, first.profile, first.run_record.data_fingerprint, same_task=True).runs) == 2  # when asked


def test_a_corrupt_or_locked_store_leaves_the_run_working_and_says_so(tmp_path, monkeypatch):
    corrupt = tmp_path / "corrupt.db"
    corrupt.write_bytes(b"this is not a database" * 100)
    search, said = _run(tmp_path, "on-corrupt", 0, corrupt, max_nodes=2)
    assert search.storage.get_run(search.run_record.name).status == "finished" and (tmp_path / "on-corrupt" / "best" / "submission.csv").is_file()
    assert any("cannot be opened" in s and str(corrupt) in s and "goes on without it" in s for s in said)
    assert any("not stored" in s for s in said)

    locked = tmp_path / "locked.db"
    ExperienceStore(store_url(str(locked)))
    holder = sqlite3.connect(locked, timeout=0)
    holder.execute("BEGIN EXCLUSIVE")  # another process holds the store
    monkeypatch.setattr("mcgs.experience.LOCK_TIMEOUT_S", 0.2)
    try:
        search, said = _run(tmp_path, "on-locked", 0, locked, max_nodes=2)
    finally:
        holder.rollback()
        holder.close()
    assert search.storage.get_run(search.run_record.name).status == "finished"
    assert any("locked" in s and "goes on without it" in s for s in said) and any("not stored" in s for s in said)


def test_the_cli_lists_exports_and_clears_the_store(first, tmp_path):
    store = _copy(first[1], tmp_path)
    mcgs_cli = [sys.executable, "-m", "mcgs", "experience"]
    listed = subprocess.run([*mcgs_cli, "list", "--store", str(store)], capture_output=True, text=True, timeout=120)
    assert listed.returncode == 0 and "1 run(s)" in listed.stdout and "binary" in listed.stdout
    out = tmp_path / "export.json"
    exported = subprocess.run([*mcgs_cli, "export", "--store", str(store), "-o", str(out)], capture_output=True, text=True, timeout=120)
    assert exported.returncode == 0
    runs = json.loads(out.read_text())["runs"]
    assert len(runs) == 1 and len(runs[0]["nodes"]) == 4 and all("rank" in n and "config" in n for n in runs[0]["nodes"])
    cleared = subprocess.run([*mcgs_cli, "clear", "--store", str(store), "--yes"], capture_output=True, text=True, timeout=120)
    assert cleared.returncode == 0 and "removed 1 run(s)" in cleared.stdout + cleared.stderr
    assert ExperienceStore(store_url(str(store))).runs() == []
    off = subprocess.run([*mcgs_cli, "list"], capture_output=True, text=True, timeout=120)  # the tests' store is off
    assert off.returncode == 2 and "--store" in off.stderr + off.stdout


def test_the_cli_adds_a_finished_run_made_without_the_store_once_and_refuses_an_unfinished_one(first, tmp_path):
    search, own, _ = first
    store = tmp_path / "later.db"
    mcgs_cli = [sys.executable, "-m", "mcgs", "experience", "add", "--store", str(store)]
    for _ in range(2):  # the second add replaces the first
        added = subprocess.run([*mcgs_cli, str(search.run_dir)], capture_output=True, text=True, timeout=120)
        assert added.returncode == 0, added.stderr
        assert "4 finished node(s)" in " ".join((added.stdout + added.stderr).split())  # rich folds long paths
    later, earlier = ExperienceStore(store_url(str(store))), ExperienceStore(store_url(str(own)))
    (run,), (orig,) = later.runs(), earlier.runs()
    assert (run["fingerprint"], run["features"], run["source"]) == (orig["fingerprint"], orig["features"], orig["source"])

    def facts(st, run_id):
        return sorted((n["model"], n["state"], n["rank"], n["leads_to_best"]) for n in st.nodes([run_id]))

    assert facts(later, run["id"]) == facts(earlier, orig["id"])
    unfinished = mcgs.create_search(_task(tmp_path / "task", 3), run_dir=tmp_path / "unfinished", coder=RecipeCoder(models=FAST), time_budget_s=60,
                                    experience_store="none")
    refused = subprocess.run([*mcgs_cli, str(unfinished.run_dir)], capture_output=True, text=True, timeout=120)
    said = " ".join((refused.stderr + refused.stdout).split())
    assert refused.returncode == 2 and "not finished" in said and "mcgs resume" in said
    assert len(later.runs()) == 1


def test_a_draft_takes_the_learned_configuration_within_its_search_space(tmp_path):
    from knowledge_base import get_entry
    from mcgs.coders.recipe_config import default_config
    from operators.draft import from_experience

    from mcgs.profile import profile_task
    from mcgs.task import load_task

    profile = profile_task(load_task(build_demo_task(tmp_path / "task")))
    entry = get_entry("model.random_forest")
    base = default_config(entry.id, profile)
    space = entry.recipe.space
    name = next(iter(space))
    exp = Experience(runs=[{"source": "x", "distance": 0.1, "fingerprint": "f"}], family_ranks={entry.id: 1.0},
                     configs={entry.id: {"params": {name: space[name].high * 10, "not_a_param": 3}, "features": {"no_such_block": True}}})
    config, note = from_experience(base, entry, exp, profile)
    assert config["params"][name] == pytest.approx(space[name].high) and "not_a_param" not in config["params"]
    assert "no_such_block" not in config["features"] and "rank 1.00" in note
    assert from_experience(base, entry, Experience(), profile) == (base, "")


def test_a_family_that_earned_a_place_in_an_ensemble_drafts_before_a_stronger_one_that_never_did(first, tmp_path):
    """Values are half a family's rank among a run's families, half whether it was part of what
    the run handed in; when most recalled runs handed in an
    ensemble, the first ensemble comes right after the drafts (not after ``ensemble_every``)."""
    first, _, _ = first
    store = ExperienceStore(store_url(str(tmp_path / "made.db")))
    row = {"source": "earlier", "fingerprint": "0" * 64, "task_kind": first.profile["task_kind"], "modality": "table", "metric": "roc_auc",
           "features_json": json.dumps(meta_features(first.profile)), "n_nodes": 4, "created_at": "2026-12-06T00:00:00+00:00"}

    def node(model, operator, rank, placed):
        return {"model": model, "operator": operator, "config_json": json.dumps({"model": model, "params": {}, "features": {}}),
                "knowledge_json": "[]", "state": "valid", "rank": rank, "runtime_s": 1.0, "cost_offset": 0.0, "leads_to_best": placed}

    store.add_run(row, [node("model.logistic_regression", "draft", 1.0, True), node("model.knn", "draft", 0.6, False),
                        node("model.knn", "improve", 0.5, False), node("model.random_forest", "draft", 0.2, True),
                        node(None, "ensemble", None, True)])
    exp = recall(store, first.profile, first.run_record.data_fingerprint)
    assert exp.family_ranks == {"model.logistic_regression": 1.0, "model.random_forest": 0.5, "model.knn": 0.25}
    assert exp.ensembles_won == 1 and "1 of those runs handed in an ensemble" in exp.summary()

    search, _ = _run(tmp_path, "follows", 1, tmp_path / "made.db", ensemble=True, num_drafts=3, max_nodes=4, ensemble_every=10)
    order = [n.operator.value if n.operator is Operator.ENSEMBLE else n.config["model"] for n in search.nodes() if n.parent_id is not None]
    assert order[:4] == ["model.logistic_regression", "model.random_forest", "model.knn", "ensemble"]
