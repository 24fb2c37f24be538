"""spaceship-titanic end to end on the real MLE-bench split (needs ../shared/data).

The acceptance numbers (three seeds, ten minutes each) come from
``experiments/spaceship_titanic.py``; these tests check the same pipeline briefly and that the
recipes are not keyed to the data set's column names.
"""

from __future__ import annotations

import shutil

import pandas as pd
import pytest
import yaml

from mcgs.coders.recipe import RecipeCoder
from mcgs.mlebench import grade_submission, prepare_competition
from mcgs.profile import profile_task
from mcgs.search import create_search
from mcgs.settings import SearchSettings
from mcgs.task import load_task
from recipe_runs import run_recipe

pytestmark = pytest.mark.realdata


@pytest.fixture(scope="module")
def data_dir(shared_data, tmp_path_factory):
    out = tmp_path_factory.mktemp("mlebench")
    prepare_competition("spaceship-titanic", shared_data / "spaceship-titanic" / "raw", out)
    return out


def run_default_lightgbm(spec, folder):
    config = RecipeCoder().default_config("model.lightgbm", profile_task(spec))
    ev, out, _ = run_recipe(spec, config, folder)
    return ev.score, out


@pytest.mark.slow
def test_meaningless_column_names_give_the_same_cv(data_dir, tmp_path):
    original = load_task(data_dir / "spaceship-titanic")
    public = original.data_dir
    renamed = tmp_path / "renamed"
    renamed.mkdir()
    train = pd.read_csv(public / "train.csv")
    mapping = {c: f"col_{k:02d}" for k, c in enumerate(train.columns)}
    for name in ("train.csv", "test.csv", "sample_submission.csv"):
        pd.read_csv(public / name).rename(columns=mapping).to_csv(renamed / name, index=False)
    (renamed / "task.yaml").write_text(yaml.safe_dump({"metric": "accuracy"}))
    spec_r = load_task(renamed)
    assert spec_r.target_columns == [mapping["Transported"]] and spec_r.id_column == mapping["PassengerId"]
    score_o, out_o = run_default_lightgbm(original, tmp_path / "o")
    score_r, out_r = run_default_lightgbm(spec_r, tmp_path / "r")
    assert score_o > 0.79
    assert abs(score_o - score_r) < 0.01
    assert out_o.splitlines()[0] == out_r.splitlines()[0]  # same number of engineered features


@pytest.mark.slow
def test_short_search_gives_a_valid_graded_submission(data_dir, tmp_path):
    settings = SearchSettings(time_budget_s=600, max_nodes=3, num_drafts=2, seed=0)
    search = create_search(data_dir / "spaceship-titanic", tmp_path / "run", settings=settings, coder=RecipeCoder(models=("model.lightgbm", "model.logistic_regression")))
    final = search.run()
    assert final is not None and final.score > 0.78
    report = grade_submission("spaceship-titanic", tmp_path / "run" / "best" / "submission.csv", data_dir)
    assert report.valid_submission and report.score > 0.78
    # held-out answers never enter the run's input
    assert not any("private" in str(p) for p in (tmp_path / "run" / "input").rglob("*"))
    shutil.rmtree(tmp_path / "run" / "nodes")
