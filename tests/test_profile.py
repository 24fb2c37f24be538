"""The data profile: column kinds from values, missingness and cardinality, target shape,
train/test drift and leakage suspicions; and columns absent from test never reach a program."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import yaml

from mcgs.profile import profile_task
from mcgs.task import load_task
from operators.code_review import review_program


def _task(folder, train: pd.DataFrame, test: pd.DataFrame, cfg: dict):
    folder.mkdir(parents=True)
    train.to_csv(folder / "train.csv", index=False)
    test.to_csv(folder / "test.csv", index=False)
    target = cfg["target"]
    test[["rid"]].assign(**{target: train[target].iloc[0]}).to_csv(folder / "sample_submission.csv", index=False)
    (folder / "task.yaml").write_text(yaml.safe_dump(cfg))
    return load_task(folder)


@pytest.fixture()
def leaky(tmp_path):
    rng = np.random.default_rng(0)
    n = 1000
    price = np.exp(rng.normal(10, 1, n))
    df = pd.DataFrame({
        "rid": np.arange(n),
        "serial": np.arange(n) + 5000,  # a row counter under another name
        "sold_at": pd.date_range("2020-01-01", periods=n, freq="D").strftime("%Y-%m-%d"),
        "area": rng.normal(100, 20, n),
        "note": [" ".join(rng.choice(["big", "old", "garden", "quiet", "busy", "road"], 6)) for _ in range(n)],
        "zone": rng.choice(["a", "b", "c"], n),
        "price_per_area_x_area": price * 1.0001,  # a disguised copy of the target
        "area_m2": None,
        "final_offer": price * rng.uniform(0.9, 1.1, n),  # recorded after the sale: train only
        "price": price,
    })
    df["area_m2"] = df["area"] * 1.0  # a duplicate of area
    df.loc[rng.random(n) < 0.2, "zone"] = None
    train, test = df.iloc[:800], df.iloc[800:].drop(columns=["price", "final_offer"]).copy()
    test["area"] = test["area"] + 40  # test houses are larger: drift
    test["area_m2"] = test["area"]
    return _task(tmp_path / "t", train, test, {"metric": "rmse", "target": "price", "id_column": "rid"})


def test_profile_kinds_missingness_target_and_drift(leaky):
    p = profile_task(leaky)
    assert p["columns"] == {
        "serial": "id_like", "sold_at": "datetime", "area": "numeric", "note": "text", "zone": "categorical",
        "price_per_area_x_area": "numeric", "area_m2": "numeric",
    }
    assert p["n_datetime"] == 1 and p["n_text"] == 1 and p["train_only_columns"] == ["final_offer"]
    assert 0.15 < p["missing"]["zone"] < 0.25 and p["cardinality"]["zone"] == 3
    assert p["target_skew"] > 2 and p["target_min"] > 0
    assert p["drifted_columns"] == ["area", "area_m2"]  # shifted by two standard deviations in test
    assert p["drift"]["area"] > 0.5 and p["drift"]["zone"] < 0.1 and p["drift"]["price_per_area_x_area"] < 0.15


def test_profile_lists_leakage_suspicions(leaky):
    reasons = {(s["column"], s["reason"].split(":")[0].split(" (")[0]) for s in profile_task(leaky)["leakage"]}
    assert ("final_offer", "in the training table but not in the test table") in reasons
    assert ("price_per_area_x_area", "named like the target") in reasons
    assert any(c == "price_per_area_x_area" and r.startswith("correlation") for c, r in reasons)
    assert ("area_m2", "near-duplicate of area") in reasons
    assert not any(c in ("area", "zone", "note") for c, _ in reasons)


def test_code_review_rejects_a_program_that_reads_a_train_only_column():
    code = (
        "import pandas as pd\ntrain = pd.read_csv('input/train.csv')\nX = train[['area', 'final_offer']]\n"
        "open('working/oof.csv','w'); open('working/test_pred.csv','w'); open('submission/submission.csv','w')\n"
    )
    review = review_program(code, train_only_columns=["final_offer"])
    assert review.verdict == "rejected" and "final_offer" in review.reasons[0]
    assert review_program(code).verdict == "passed"


def test_a_pipeline_step_named_like_a_train_only_column_is_not_a_read_of_it():
    # the recipe coder's column transformer names its one-hot step "cat"; a training-only column
    # called "cat" must not get every such program rejected, while indexing by it still is
    step = (
        "from sklearn.compose import ColumnTransformer\nfrom sklearn.preprocessing import OneHotEncoder\n"
        "ct = ColumnTransformer([('cat', OneHotEncoder(), ['colour'])])\n"
        "open('working/oof.csv','w'); open('working/test_pred.csv','w'); open('submission/submission.csv','w')\n"
    )
    assert review_program(step, train_only_columns=["cat"]).verdict == "passed"
    reads = step + "import pandas as pd\nX = pd.read_csv('input/train.csv')['cat']\n"
    review = review_program(reads, train_only_columns=["cat"])
    assert review.verdict == "rejected" and "'cat'" in review.reasons[0]


@pytest.mark.realdata
def test_pizza_train_only_fields_are_flagged_and_no_node_reads_them(shared_data, tmp_path):
    from mcgs.coders.recipe import RecipeCoder
    from mcgs.mlebench import prepare_competition
    from mcgs.search import create_search
    from mcgs.settings import SearchSettings

    prepare_competition("random-acts-of-pizza", shared_data / "random-acts-of-pizza" / "raw", tmp_path / "data")
    spec = load_task(tmp_path / "data" / "random-acts-of-pizza")
    p = profile_task(spec)
    train_only = set(p["train_only_columns"])
    assert len(train_only) == 14  # 32 training fields - 17 test fields - the label
    assert {"requester_user_flair", "number_of_upvotes_of_request_at_retrieval", "request_text"} <= train_only
    flagged = {s["column"] for s in p["leakage"]}
    assert train_only <= flagged
    # a known leak that Kaggle's own test file carries: a giver's name appears only on successful requests
    assert "giver_username_if_known" in flagged
    assert not train_only & set(p["columns"])  # none is a feature
    settings = SearchSettings(max_nodes=2, time_budget_s=600, ensemble=False, policy="tree", seed=0)
    search = create_search(spec, tmp_path / "run", settings=settings, coder=RecipeCoder(models=("model.logistic_regression",)))
    search.run()
    nodes = [n for n in search.nodes() if n.code]
    assert len(nodes) == 2 and any(n.is_valid for n in nodes)
    for n in nodes:
        assert n.review["verdict"] != "rejected"
        assert not any(f"'{c}'" in n.code or f'"{c}"' in n.code for c in train_only)
