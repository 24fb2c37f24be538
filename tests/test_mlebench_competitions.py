"""Real-data tests for the five MLE-bench competitions besides spaceship-titanic.

Each competition is prepared once from ``shared/data/<id>/raw`` (all five take ~4 s), its
prepared files are compared with MLE-bench's md5s, and submissions built in the test
(sample, constant, perfect, invalid) are graded, with the expected score computed here by
hand with numpy.
"""

from __future__ import annotations

import hashlib
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from mcgs.mlebench import (
    GradingReport,
    competition_ids,
    get_competition,
    grade_submission,
    prepare_competition,
)

pytestmark = pytest.mark.realdata

NOMAD = "nomad2018-predict-transparent-conductors"
LEAF = "leaf-classification"
PIZZA = "random-acts-of-pizza"
SPOOKY = "spooky-author-identification"
INSULTS = "detecting-insults-in-social-commentary"
COMPETITIONS = (NOMAD, LEAF, PIZZA, SPOOKY, INSULTS)

# MLE-bench mlebench/competitions/<id>/checksums.yaml (openai/mle-bench 783b15af), every file
# it lists: all are reproduced, including the one-hot answers of leaf and spooky.
EXPECTED_MD5 = {
    NOMAD: {
        "public/train.csv": "27ef5faad359d2dd4ac872fab5c9010d",
        "public/test.csv": "be4e478c19d962eae8ffde95163fe8b1",
        "public/sample_submission.csv": "f6ca859f7a81041cad0594cf31f171d9",
        "private/test.csv": "fc17cf7adf422874ce65f2b1b1265d98",
    },
    LEAF: {
        "public/train.csv": "02920a969976f89192a3d1c03a30cd2c",
        "public/test.csv": "52a1b1a2b6fb392986b9579dd52036c7",
        "public/sample_submission.csv": "e9fbff4eafce74b4905feffdaa9e5859",
        "private/test.csv": "028b4798af4eeafc69ab98b22dc2c70a",
    },
    PIZZA: {
        "public/train.json": "67a72ab0b01bb8fabb81f8406cc485f1",
        "public/test.json": "f86bbac7e5eb9658632ac51ccef06042",
        "public/sampleSubmission.csv": "6d7556c9a2f353b5d83ab0424a1bc914",
        "private/test.csv": "b7a9c13b5f063dcfff7102f39f8c95ca",
    },
    SPOOKY: {
        "public/train.csv": "1124166bf7b8b1e337a32fe568732447",
        "public/test.csv": "2ea5096a8e8cf340b13a7a18d9bdd914",
        "public/sample_submission.csv": "3b754ff50b2b4416150bb00c86c34889",
        "private/test.csv": "fb1381c6c9a7e9efd236c625807a0c8a",
    },
    INSULTS: {
        "public/train.csv": "60f8ff55967759d144efd4f055f37673",
        "public/test.csv": "6dd3e4189309b7b513fcf124be21c790",
        "public/sample_submission_null.csv": "a0dcbebb9f3aa642325ec3b83dacafa1",
        "private/test.csv": "76d6e15e475a2fd634bdd8cdfb4746c0",
        "private/gold_submission.csv": "937dc9172f07ab3f72f123c79e37652c",
    },
}

# Rows of the new test set (= answers) per competition.
N_TEST = {NOMAD: 240, LEAF: 99, PIZZA: 1162, SPOOKY: 1958, INSULTS: 2647}


def _md5(path: Path) -> str:
    return hashlib.md5(path.read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def data_dir(shared_data: Path, tmp_path_factory) -> Path:
    """All five competitions prepared (and md5-verified by prepare_competition) once."""
    out = tmp_path_factory.mktemp("mlebench-five")
    for comp in COMPETITIONS:
        prepare_competition(comp, shared_data / comp / "raw", out)
    return out


def _config(data_dir: Path, comp: str) -> dict:
    return yaml.safe_load((data_dir / comp / "config.yaml").read_text())


def _answers(data_dir: Path, comp: str) -> pd.DataFrame:
    return pd.read_csv(data_dir / comp / "prepared" / "private" / "test.csv")


def _sample(data_dir: Path, comp: str) -> pd.DataFrame:
    return pd.read_csv(data_dir / comp / _config(data_dir, comp)["dataset"]["sample_submission"])


def _grade(
    data_dir: Path, comp: str, frame: pd.DataFrame, tmp_path: Path, name: str
) -> GradingReport:
    path = tmp_path / f"{name}.csv"
    frame.to_csv(path, index=False)
    return grade_submission(comp, path, data_dir)


def _assert_valid(report: GradingReport, expected: float) -> None:
    assert report.valid_submission and report.error is None, report.error
    assert report.score == pytest.approx(expected, abs=6e-6)  # graded scores are rounded to 5 dp


def _assert_invalid(report: GradingReport, *needles: str) -> None:
    assert report.submission_exists and not report.valid_submission
    assert report.score is None and not report.any_medal and not report.above_median
    for needle in needles:
        assert needle in report.error, (needle, report.error)


def _rmsle(y_true: np.ndarray, y_pred: np.ndarray) -> float:
    return float(np.sqrt(np.mean((np.log1p(y_pred) - np.log1p(y_true)) ** 2)))


# --- preparation -----------------------------------------------------------------------------


def test_registered_competitions():
    # aerial-cactus-identification (images) is tested in test_images.py
    assert set(COMPETITIONS) | {"spaceship-titanic", "aerial-cactus-identification"} == set(competition_ids())


@pytest.mark.parametrize("comp", COMPETITIONS)
def test_prepared_files_match_mlebench_md5s(data_dir: Path, shared_data: Path, comp: str):
    published = yaml.safe_load((shared_data / comp / "mlebench" / "checksums.yaml").read_text())
    listed = {f"{s}/{n}" for s in ("public", "private") for n in (published.get(s) or {})}
    assert listed == set(EXPECTED_MD5[comp])  # every file MLE-bench lists is checked here
    for rel, expected in EXPECTED_MD5[comp].items():
        section, name = rel.split("/")
        assert published[section][name] == expected, rel
        assert _md5(data_dir / comp / "prepared" / rel) == expected, rel
    assert len(_answers(data_dir, comp)) == N_TEST[comp]
    assert len(_sample(data_dir, comp)) == N_TEST[comp]


def test_nomad_geometry_files_renumbered(data_dir: Path):
    public = data_dir / NOMAD / "prepared" / "public"
    assert len(list(public.glob("train/*/geometry.xyz"))) == 2160
    assert len(list(public.glob("test/*/geometry.xyz"))) == 240
    test = pd.read_csv(public / "test.csv")
    assert test["id"].tolist() == list(range(1, 241))
    assert (public / "test" / "240" / "geometry.xyz").is_file()
    n_atoms = int(test.loc[test["id"] == 1, "number_of_total_atoms"].iloc[0])
    xyz = (public / "test" / "1" / "geometry.xyz").read_text().splitlines()
    assert sum(line.startswith("atom") for line in xyz) == n_atoms  # the right geometry moved


def test_pizza_public_files_hide_train_only_fields(data_dir: Path):
    import json

    public = data_dir / PIZZA / "prepared" / "public"
    test = json.loads((public / "test.json").read_text())
    train = json.loads((public / "train.json").read_text())
    assert len(test) == 1162 and len(train) == 2878
    assert len(test[0]) == 17 and len(train[0]) == 32
    assert "requester_received_pizza" not in test[0] and "requester_user_flair" not in test[0]
    assert (public / "train.zip").is_file() and (public / "test.zip").is_file()


@pytest.mark.parametrize(
    ("comp", "target", "id_column", "metric", "extra"),
    [
        (NOMAD, ["formation_energy_ev_natom", "bandgap_energy_ev"], "id", "mean_column_rmsle", {}),
        (LEAF, "species", "id", "log_loss", {}),
        (SPOOKY, "author", "id", "log_loss", {}),
        (
            PIZZA,
            "requester_received_pizza",
            "request_id",
            "roc_auc",
            {
                "train_file": "train.json",
                "test_file": "test.json",
                "sample_submission_file": "sampleSubmission.csv",
            },
        ),
        (
            INSULTS,
            "Insult",
            None,
            "roc_auc",
            {"no_id_column": True, "sample_submission_file": "sample_submission_null.csv"},
        ),
    ],
)
def test_config_yaml(data_dir: Path, comp, target, id_column, metric, extra):
    from mcgs.metrics import get_metric

    config = _config(data_dir, comp)
    assert (config["id"], config["target"], config["id_column"]) == (comp, target, id_column)
    assert config["metric"] == metric and get_metric(config["metric"]).name == metric
    assert get_metric(config["grader"]["name"]).name == metric
    for key, value in extra.items():
        assert config[key] == value, key
    assert (data_dir / comp / config["dataset"]["answers"]).is_file()
    assert (data_dir / comp / config["dataset"]["sample_submission"]).is_file()


@pytest.mark.parametrize("comp", COMPETITIONS)
def test_medal_thresholds_match_shared_table(data_dir: Path, shared_data: Path, comp: str):
    row = (
        pd.read_csv(shared_data / "mlebench_medal_thresholds.csv")
        .set_index("competition_id")
        .loc[comp]
    )
    report = grade_submission(
        comp, data_dir / comp / _config(data_dir, comp)["dataset"]["sample_submission"], data_dir
    )
    assert report.is_lower_better == bool(row["lower_is_better"])
    for key in ("gold", "silver", "bronze", "median"):
        assert getattr(report, f"{key}_threshold") == pytest.approx(row[key], rel=1e-9), key


# --- grading: nomad (mean column-wise RMSLE) ---------------------------------------------------


def test_grade_nomad(data_dir: Path, tmp_path: Path):
    answers = _answers(data_dir, NOMAD)
    targets = ["formation_energy_ev_natom", "bandgap_energy_ev"]
    f, b = (answers[t].to_numpy(float) for t in targets)

    expected = (_rmsle(f, np.full_like(f, 0.1779)) + _rmsle(b, np.full_like(b, 1.8892))) / 2
    _assert_valid(_grade(data_dir, NOMAD, _sample(data_dir, NOMAD), tmp_path, "sample"), expected)

    const = answers[["id"]].assign(**{targets[0]: 0.2, targets[1]: 2.0})
    expected = (_rmsle(f, np.full_like(f, 0.2)) + _rmsle(b, np.full_like(b, 2.0))) / 2
    _assert_valid(_grade(data_dir, NOMAD, const, tmp_path, "const"), expected)

    perfect = answers[["id", *targets]]
    report = _grade(data_dir, NOMAD, perfect.sample(frac=1, random_state=0), tmp_path, "perfect")
    _assert_valid(report, 0.0)
    assert report.gold_medal and report.is_lower_better

    _assert_invalid(_grade(data_dir, NOMAD, perfect.drop(columns="id"), tmp_path, "noid"), "'id'")
    _assert_invalid(
        _grade(data_dir, NOMAD, perfect.iloc[1:], tmp_path, "short"),
        "missing 1 id(s) [",
        "239 rows",
    )
    renamed = perfect.rename(columns={targets[1]: "bandgap"})
    _assert_invalid(_grade(data_dir, NOMAD, renamed, tmp_path, "renamed"), "'bandgap_energy_ev'")
    negative = perfect.copy()
    negative.loc[negative.index[:2], targets[0]] = -1.5
    _assert_invalid(
        _grade(data_dir, NOMAD, negative, tmp_path, "neg"), "formation_energy_ev_natom", "<= -1"
    )


# --- grading: leaf and spooky (one-hot multi-class log loss) -----------------------------------


@pytest.mark.parametrize("comp", [LEAF, SPOOKY])
def test_grade_one_hot_log_loss(data_dir: Path, tmp_path: Path, comp: str):
    answers = _answers(data_dir, comp)
    classes = list(get_competition(comp).classes)
    assert list(answers.columns) == ["id", *classes]
    y = answers[classes].to_numpy(float)
    assert (y.sum(axis=1) == 1).all()

    sample = _sample(data_dir, comp)
    p = sample.set_index("id").loc[answers["id"], classes].to_numpy(float)
    p = p / p.sum(axis=1, keepdims=True)
    expected = float(-np.mean(np.log((p * y).sum(axis=1))))
    _assert_valid(_grade(data_dir, comp, sample, tmp_path, "sample"), expected)

    uniform = answers.copy()
    uniform[classes] = 1 / len(classes)
    _assert_valid(_grade(data_dir, comp, uniform, tmp_path, "uniform"), math.log(len(classes)))

    report = _grade(data_dir, comp, answers.sample(frac=1, random_state=0), tmp_path, "perfect")
    _assert_valid(report, 0.0)
    assert report.gold_medal and report.is_lower_better

    _assert_invalid(
        _grade(data_dir, comp, uniform.drop(columns=classes[-1]), tmp_path, "nocol"),
        "missing column(s)",
        repr(classes[-1]),
    )
    _assert_invalid(_grade(data_dir, comp, uniform.drop(columns="id"), tmp_path, "noid"), "'id'")
    wrong_id = uniform.copy()
    bogus = -7 if answers["id"].dtype.kind in "iu" else "id_bogus"
    wrong_id.loc[0, "id"] = bogus
    _assert_invalid(
        _grade(data_dir, comp, wrong_id, tmp_path, "wrongid"),
        f"not in the test set [{bogus!r}]",
        f"missing 1 id(s) [{answers['id'].tolist()[0]!r}]",
    )
    unnormalised = uniform.copy()
    unnormalised.loc[3, classes[0]] = 0.9
    _assert_invalid(
        _grade(data_dir, comp, unnormalised, tmp_path, "sum"),
        "sum to 1",
        str(answers.loc[3, "id"]),
    )


# --- grading: pizza and insults (ROC AUC) ------------------------------------------------------


def test_grade_pizza(data_dir: Path, tmp_path: Path):
    answers = _answers(data_dir, PIZZA)
    key, target = "request_id", "requester_received_pizza"
    _assert_valid(_grade(data_dir, PIZZA, _sample(data_dir, PIZZA), tmp_path, "sample"), 0.5)
    _assert_valid(_grade(data_dir, PIZZA, answers.assign(**{target: 0.5}), tmp_path, "half"), 0.5)

    report = _grade(data_dir, PIZZA, answers.sample(frac=1, random_state=0), tmp_path, "perfect")
    _assert_valid(report, 1.0)
    assert report.gold_medal and not report.is_lower_better

    # AUC by hand (Mann-Whitney) for a one-feature score: rank of a deterministic hash.
    score = answers[key].map(lambda s: int(hashlib.md5(s.encode()).hexdigest()[:8], 16) / 16**8)
    pos, neg = score[answers[target] == 1].to_numpy(), score[answers[target] == 0].to_numpy()
    expected = float(
        ((pos[:, None] > neg[None, :]).sum() + 0.5 * (pos[:, None] == neg[None, :]).sum())
        / (len(pos) * len(neg))
    )
    _assert_valid(
        _grade(data_dir, PIZZA, answers.assign(**{target: score}), tmp_path, "hash"), expected
    )

    _assert_invalid(
        _grade(data_dir, PIZZA, answers.drop(columns=key), tmp_path, "noid"), "'request_id'"
    )
    _assert_invalid(
        _grade(data_dir, PIZZA, answers.iloc[:-1], tmp_path, "short"),
        f"missing 1 request_id(s) [{answers[key].iloc[-1]!r}]",
    )
    too_big = answers.assign(**{target: 2.0})
    _assert_invalid(_grade(data_dir, PIZZA, too_big, tmp_path, "big"), "[0, 1]", target)


def test_grade_insults(data_dir: Path, tmp_path: Path):
    answers = _answers(data_dir, INSULTS)
    assert answers["Comment"].duplicated().sum() == 20  # rows are matched by a repeating key
    _assert_valid(_grade(data_dir, INSULTS, _sample(data_dir, INSULTS), tmp_path, "sample"), 0.5)
    half = answers[["Insult", "Date", "Comment"]].assign(Insult=0.5)
    _assert_valid(_grade(data_dir, INSULTS, half, tmp_path, "half"), 0.5)

    gold = pd.read_csv(data_dir / INSULTS / "prepared" / "private" / "gold_submission.csv")
    report = _grade(data_dir, INSULTS, gold.sample(frac=1, random_state=0), tmp_path, "gold")
    _assert_valid(report, 1.0)
    assert report.gold_medal and not report.is_lower_better
    # Date is optional; Comment and Insult are enough.
    _assert_valid(_grade(data_dir, INSULTS, gold[["Comment", "Insult"]], tmp_path, "nodate"), 1.0)

    _assert_invalid(
        _grade(data_dir, INSULTS, gold.drop(columns="Comment"), tmp_path, "nocomment"),
        "'Comment'",
    )
    _assert_invalid(
        _grade(data_dir, INSULTS, gold.rename(columns={"Insult": "insult"}), tmp_path, "case"),
        "'Insult'",
    )
    dropped = gold.drop(index=5)
    _assert_invalid(
        _grade(data_dir, INSULTS, dropped, tmp_path, "short"),
        "missing 1 Comment(s)",
        repr(gold.loc[5, "Comment"])[:20],
    )
