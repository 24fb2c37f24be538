"""The ablation's paired bootstrap of the held-out advantage (experiments/ablation.py)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def ablation():
    spec = importlib.util.spec_from_file_location("ablation", ROOT / "experiments" / "ablation.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["ablation"] = module
    spec.loader.exec_module(module)
    return module


def _holdout(tmp_path, ablation, n=150):
    rng = np.random.default_rng(0)
    price = np.exp(rng.normal(12.0, 0.4, n))
    ids = np.arange(1000, 1000 + n)
    folder = tmp_path / "data" / ablation.HOUSE
    folder.mkdir(parents=True)
    pd.DataFrame({"Id": ids, "SalePrice": price}).to_csv(folder / "holdout_answers.csv", index=False)

    def submission(name, log_noise, order=None):
        pred = price * np.exp(rng.normal(0, log_noise, n))
        frame = pd.DataFrame({"Id": ids, "SalePrice": pred})
        frame = frame.iloc[order] if order is not None else frame
        path = tmp_path / f"{name}.csv"
        frame.to_csv(path, index=False)
        return path

    return tmp_path / "data", submission


def test_a_clearly_better_submission_has_an_interval_above_zero(tmp_path, ablation):
    data, submission = _holdout(tmp_path, ablation)
    good = submission("good", 0.05, order=np.random.default_rng(1).permutation(150))  # row order must not matter
    bad = submission("bad", 0.20)
    out = ablation.heldout_difference(ablation.HOUSE, good, bad, data, lower_is_better=True, n_boot=200)
    full_good, full_bad = ablation.grade(ablation.HOUSE, good, data), ablation.grade(ablation.HOUSE, bad, data)
    assert out["gain"] == pytest.approx(full_bad - full_good, abs=2e-5)  # positive = the first is better
    assert 0 < out["lo"] < out["gain"] < out["hi"] and out["p_better"] == 1.0
    reverse = ablation.heldout_difference(ablation.HOUSE, bad, good, data, lower_is_better=True, n_boot=200)
    assert reverse["gain"] == pytest.approx(-out["gain"]) and reverse["hi"] < 0 and reverse["p_better"] == 0.0


def test_two_similar_submissions_get_an_interval_around_zero_and_a_gap_gives_none(tmp_path, ablation):
    data, submission = _holdout(tmp_path, ablation)
    a, b = submission("a", 0.12), submission("b", 0.12)
    out = ablation.heldout_difference(ablation.HOUSE, a, b, data, lower_is_better=True, n_boot=300)
    assert out["lo"] < 0 < out["hi"] and 0.02 < out["p_better"] < 0.98
    partial = tmp_path / "partial.csv"
    pd.read_csv(a).iloc[:-3].to_csv(partial, index=False)
    assert ablation.heldout_difference(ablation.HOUSE, partial, b, data, lower_is_better=True) is None
    assert ablation.heldout_difference(ablation.HOUSE, tmp_path / "missing.csv", b, data, lower_is_better=True) is None


def test_pooled_over_seeds_resamples_the_seeds_too(tmp_path, ablation):
    """Two seeds: A far better in one and a little worse in the other. Resampling only the
    held-out rows would call the mean advantage sure; drawing the seeds too must not."""
    data, submission = _holdout(tmp_path, ablation)
    far_a, far_b = submission("far_a", 0.03), submission("far_b", 0.30)
    near_a, near_b = submission("near_a", 0.13), submission("near_b", 0.10)
    one = ablation.pooled_heldout_difference(ablation.HOUSE, [(far_a, far_b)], data, lower_is_better=True, n_boot=200)
    two = ablation.heldout_difference(ablation.HOUSE, near_a, near_b, data, lower_is_better=True, n_boot=200)
    assert one["lo"] > 0 and two["hi"] < 0 and one["pairs"] == 1
    both = ablation.pooled_heldout_difference(ablation.HOUSE, [(far_a, far_b), (near_a, near_b), (tmp_path / "missing.csv", near_b)],
                                              data, lower_is_better=True, n_boot=200)
    assert both["pairs"] == 2 and both["gain"] == pytest.approx((one["gain"] + two["gain"]) / 2, abs=1e-6) and both["gain"] > 0
    assert both["lo"] < 0 < both["hi"] and 0.5 < both["p_better"] < 0.95  # a quarter of the draws take the near pair twice
    assert ablation.pooled_heldout_difference(ablation.HOUSE, [(tmp_path / "missing.csv", near_b)], data, lower_is_better=True) is None


def _competition(tmp_path, task_id, answers):
    """A prepared MLE-bench competition folder with only what held-out grading reads."""
    folder = tmp_path / "data" / task_id
    (folder / "prepared" / "private").mkdir(parents=True)
    answers.to_csv(folder / "prepared" / "private" / "test.csv", index=False)
    (folder / "config.yaml").write_text(f"id: {task_id}\ndataset:\n  answers: prepared/private/test.csv\n")
    return tmp_path / "data"


@pytest.mark.slow
@pytest.mark.parametrize("task", ["spaceship-titanic", "nomad2018-predict-transparent-conductors", "leaf-classification", "house"])
def test_weighted_resamples_give_the_graders_numbers(tmp_path, ablation, task, monkeypatch):
    """Scoring a resample as the full split with each row weighted by its count in the draw
    must give what the task's grader gives on the resampled rows, for every metric kind."""
    from mcgs.mlebench.registry import get_competition

    rng = np.random.default_rng(3)
    n = 90
    if task == "house":
        task = ablation.HOUSE
        data, submission = _holdout(tmp_path, ablation, n=n)
        pairs = [(submission(f"a{s}", 0.08), submission(f"b{s}", 0.10)) for s in range(3)]
    else:
        spec = get_competition(task)
        ids = [f"{i:04d}_01" for i in range(n)] if task == "spaceship-titanic" else np.arange(1, n + 1)
        if task == "spaceship-titanic":
            truth = rng.random(n) < 0.5
            answers = pd.DataFrame({spec.id_column: ids, "Transported": truth})

            def predict(skill):
                return pd.DataFrame({spec.id_column: ids, "Transported": np.where(rng.random(n) < skill, truth, ~truth)})
        elif task == "leaf-classification":
            classes = list(spec.classes)
            label = rng.integers(0, len(classes), n)
            answers = pd.DataFrame(np.eye(len(classes))[label], columns=classes).assign(id=ids)[["id", *classes]]

            def predict(skill):
                logits = rng.normal(0, 1, (n, len(classes))) + skill * 4 * np.eye(len(classes))[label]
                p = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
                return pd.DataFrame(p, columns=classes).assign(id=ids)[["id", *classes]]
        else:
            targets = list(spec.targets)
            truth = rng.gamma(2.0, 0.5, (n, len(targets)))
            answers = pd.DataFrame(truth, columns=targets).assign(id=ids)[["id", *targets]]

            def predict(skill):
                return pd.DataFrame(truth * np.exp(rng.normal(0, 1 - skill, truth.shape)), columns=targets).assign(id=ids)[["id", *targets]]
        data = _competition(tmp_path, task, answers)
        pairs = []
        for s in range(3):
            pair = []
            for name, skill in (("a", 0.8), ("b", 0.7)):
                path = tmp_path / f"{name}{s}.csv"
                predict(skill).sample(frac=1, random_state=s).to_csv(path, index=False)  # row order must not matter
                pair.append(path)
            pairs.append(tuple(pair))
    lower = task != "spaceship-titanic"
    weighted_calls = []
    metric = ablation._weighted_score(task)
    monkeypatch.setattr(ablation, "_weighted_score", lambda t: lambda ans, sub: (lambda f: lambda w: weighted_calls.append(w.copy()) or f(w))(metric(ans, sub)))
    weighted = ablation.pooled_heldout_difference(task, pairs, data, lower, n_boot=40, seed=1)
    assert len(weighted_calls) > 6 * 20 and all(w.sum() == n for w in weighted_calls)  # the weighted path was taken
    monkeypatch.undo()
    graded = ablation.pooled_heldout_difference(task, pairs, data, lower, n_boot=40, seed=1, weighted=False)
    assert weighted["pairs"] == 3 and weighted["lo"] < weighted["hi"]
    assert weighted == pytest.approx(graded, abs=1e-9)
