"""Tests for mcgs.mlebench: MLE-bench split rebuild, grading and medal thresholds.

Real-data tests (``realdata``) prepare spaceship-titanic from ``shared/data`` and check the
md5s MLE-bench publishes. The rest run on a small synthetic spaceship-like competition that
goes through the same ``prepare_competition`` → ``grade_submission`` path.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pydantic
import pytest
import yaml

from mcgs.mlebench import (
    ChecksumMismatchError,
    GradingReport,
    MLEBenchError,
    competition_ids,
    grade_submission,
    medal_ranks,
    medal_thresholds,
    medals_for_score,
    prepare_competition,
)
from mcgs.mlebench.grade import MLEBENCH_REPORT_FIELDS

COMP = "spaceship-titanic"

# MLE-bench mlebench/competitions/spaceship-titanic/checksums.yaml (openai/mle-bench 783b15af).
SPACESHIP_MD5 = {
    "prepared/public/train.csv": "564a1614ecef9d9611cec4efdce4c412",
    "prepared/public/test.csv": "8186bd4048aece25f1ed45708f8f34e1",
    "prepared/private/test.csv": "1cb99c65efecaba968128577722a83ef",  # answers
    "prepared/public/sample_submission.csv": "5414b5da6ebcff454de1c9ed39b73774",
}


def _md5(path: Path) -> str:
    return hashlib.md5(path.read_bytes()).hexdigest()


def _answers(data_dir: Path) -> pd.DataFrame:
    return pd.read_csv(data_dir / COMP / "prepared" / "private" / "test.csv")


def _submit(df: pd.DataFrame, tmp_path: Path, name: str = "submission.csv") -> Path:
    path = tmp_path / name
    df.to_csv(path, index=False)
    return path


def _assert_invalid(report: GradingReport) -> None:
    assert report.valid_submission is False
    assert report.score is None
    assert not (report.any_medal or report.gold_medal or report.silver_medal)
    assert not (report.bronze_medal or report.above_median)
    assert report.error


# --- fixtures --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def spaceship_data(shared_data: Path, tmp_path_factory) -> Path:
    """Data folder holding the real spaceship-titanic, prepared once per module."""
    data_dir = tmp_path_factory.mktemp("mlebench-data")
    prepare_competition(COMP, shared_data / COMP / "raw", data_dir)
    return data_dir


# Synthetic leaderboard of 50 teams (N < 100: gold/silver/bronze = ranks 5/10/20):
# gold 1.0, silver 0.95, bronze 0.9, median 0.8.
_SYNTH_LB = [1.0] * 5 + [0.95] * 5 + [0.9] * 10 + [0.8] * 10 + [0.6] * 20


def _write_synthetic_source(root: Path, *, checksums: dict | None = None) -> Path:
    """A spaceship-like raw/ and mlebench/ pair; returns the raw folder."""
    rng = np.random.default_rng(0)
    n = 200
    raw = root / "raw"
    raw.mkdir(parents=True)
    pd.DataFrame(
        {
            "PassengerId": [f"{i:04d}_01" for i in range(n)],
            "HomePlanet": rng.choice(["Earth", "Mars", "Europa"], n),
            "Age": rng.integers(0, 80, n).astype(float),
            "Transported": rng.random(n) < 0.5,
        }
    ).to_csv(raw / "train.csv", index=False)
    mle = root / "mlebench"
    mle.mkdir()
    (mle / "description.md").write_text("# synthetic spaceship\n")
    pd.DataFrame({"teamId": range(len(_SYNTH_LB)), "score": _SYNTH_LB}).to_csv(
        mle / "leaderboard.csv", index=False
    )
    if checksums is not None:
        (mle / "checksums.yaml").write_text(yaml.safe_dump(checksums))
    return raw


@pytest.fixture()
def synthetic_data(tmp_path: Path) -> Path:
    """Data folder holding a prepared synthetic spaceship-titanic (20 test rows)."""
    raw = _write_synthetic_source(tmp_path / "source")
    data_dir = tmp_path / "data"
    prepare_competition(COMP, raw, data_dir)
    return data_dir


# --- (a) preparation reproduces MLE-bench's split --------------------------------------------


@pytest.mark.realdata
def test_prepare_spaceship_reproduces_mlebench_md5s(spaceship_data: Path, shared_data: Path):
    comp_dir = spaceship_data / COMP
    published = yaml.safe_load((shared_data / COMP / "mlebench" / "checksums.yaml").read_text())
    for rel, expected in SPACESHIP_MD5.items():
        _, section, name = rel.split("/")
        assert _md5(comp_dir / rel) == expected, rel
        assert published[section][name] == expected, rel

    public_test = pd.read_csv(comp_dir / "prepared" / "public" / "test.csv")
    answers = _answers(spaceship_data)
    assert "Transported" not in public_test.columns
    assert len(public_test) == len(answers) == 870
    assert len(pd.read_csv(comp_dir / "prepared" / "public" / "train.csv")) == 7823
    for name in ("leaderboard.csv", "checksums.yaml", "config.yaml"):
        assert (comp_dir / name).is_file(), name
    assert (comp_dir / "prepared" / "public" / "description.md").is_file()


@pytest.mark.realdata
def test_prepare_twice_is_idempotent(spaceship_data: Path, shared_data: Path):
    comp_dir = spaceship_data / COMP
    before = {p: _md5(p) for p in comp_dir.rglob("*") if p.is_file()}
    assert prepare_competition(COMP, shared_data / COMP / "raw", spaceship_data) == comp_dir
    after = {p: _md5(p) for p in comp_dir.rglob("*") if p.is_file()}
    assert after == before


@pytest.mark.realdata
def test_config_yaml_has_mlebench_and_mcgs_fields(spaceship_data: Path):
    config = yaml.safe_load((spaceship_data / COMP / "config.yaml").read_text())
    assert config["id"] == COMP
    assert config["name"] == "Spaceship Titanic"
    assert config["competition_type"] == "simple"
    assert config["grader"] == {"name": "accuracy"}
    assert config["dataset"] == {
        "answers": "prepared/private/test.csv",
        "sample_submission": "prepared/public/sample_submission.csv",
    }
    assert (config["target"], config["id_column"], config["metric"]) == (
        "Transported",
        "PassengerId",
        "accuracy",
    )


@pytest.mark.realdata
def test_thresholds_match_shared_threshold_table(shared_data: Path):
    table = pd.read_csv(shared_data / "mlebench_medal_thresholds.csv").set_index("competition_id")
    checked = []
    for lb_path in sorted(shared_data.glob("*/mlebench/leaderboard.csv")):
        comp = lb_path.parent.parent.name
        if comp not in table.index:
            continue
        row = table.loc[comp]
        scores = pd.read_csv(lb_path)["score"]
        assert len(scores) == row["n_teams"], comp
        got = medal_thresholds(scores, bool(row["lower_is_better"]))
        for key in ("gold", "silver", "bronze", "median"):
            assert got[f"{key}_threshold"] == pytest.approx(row[key], rel=1e-9), (comp, key)
        checked.append(comp)
    assert COMP in checked
    spaceship_lb = pd.read_csv(shared_data / COMP / "mlebench" / "leaderboard.csv")
    assert medal_thresholds(spaceship_lb["score"], lower_is_better=False) == {
        "gold_threshold": 0.82066,
        "silver_threshold": 0.81388,
        "bronze_threshold": 0.80967,
        "median_threshold": 0.79565,
    }


# --- (b) grading -----------------------------------------------------------------------------


@pytest.mark.realdata
def test_grade_spaceship_perfect_all_false_and_shuffled(spaceship_data: Path, tmp_path: Path):
    answers = _answers(spaceship_data)
    perfect = answers[["PassengerId", "Transported"]]

    report = grade_submission(COMP, _submit(perfect, tmp_path), spaceship_data)
    assert report.valid_submission and report.submission_exists and report.error is None
    assert report.score == 1.0
    assert report.gold_medal and report.any_medal and report.above_median
    assert not (report.silver_medal or report.bronze_medal)
    assert report.is_lower_better is False
    assert (report.gold_threshold, report.silver_threshold) == (0.82066, 0.81388)
    assert (report.bronze_threshold, report.median_threshold) == (0.80967, 0.79565)

    shuffled = perfect.sample(frac=1.0, random_state=1)
    assert grade_submission(COMP, _submit(shuffled, tmp_path, "s.csv"), spaceship_data).score == 1.0

    sample = spaceship_data / COMP / "prepared" / "public" / "sample_submission.csv"
    all_false = grade_submission(COMP, sample, spaceship_data)
    expected = round(float((~answers["Transported"]).mean()), 5)
    assert all_false.valid_submission and all_false.score == expected
    assert not (all_false.any_medal or all_false.above_median)


def test_grade_perfect_gold_all_false_no_medal(synthetic_data: Path, tmp_path: Path):
    answers = _answers(synthetic_data)
    assert len(answers) == 20
    perfect = grade_submission(
        COMP, _submit(answers[["PassengerId", "Transported"]], tmp_path), synthetic_data
    )
    assert perfect.score == 1.0 and perfect.gold_medal and perfect.any_medal

    all_false = answers[["PassengerId"]].assign(Transported=False)
    report = grade_submission(COMP, _submit(all_false, tmp_path, "f.csv"), synthetic_data)
    assert report.valid_submission
    assert report.score == round(float((~answers["Transported"]).mean()), 5)
    assert report.score < 0.8  # the synthetic median
    assert not (report.any_medal or report.above_median)


def test_shuffled_rows_give_the_same_score(synthetic_data: Path, tmp_path: Path):
    answers = _answers(synthetic_data)
    sub = answers[["PassengerId", "Transported"]].copy()
    sub.loc[sub.index[:3], "Transported"] = ~sub.loc[sub.index[:3], "Transported"]
    in_order = grade_submission(COMP, _submit(sub, tmp_path, "a.csv"), synthetic_data)
    shuffled = grade_submission(
        COMP, _submit(sub.sample(frac=1.0, random_state=3), tmp_path, "b.csv"), synthetic_data
    )
    assert in_order.valid_submission and shuffled.valid_submission
    assert in_order.score == shuffled.score == 0.85


def test_score_equal_to_bronze_threshold_earns_bronze_end_to_end(
    synthetic_data: Path, tmp_path: Path
):
    answers = _answers(synthetic_data)
    sub = answers[["PassengerId", "Transported"]].copy()
    sub.loc[sub.index[:2], "Transported"] = ~sub.loc[sub.index[:2], "Transported"]  # 18/20
    report = grade_submission(COMP, _submit(sub, tmp_path), synthetic_data)
    assert report.score == 0.9 == report.bronze_threshold
    assert report.bronze_medal and report.any_medal and report.above_median
    assert not (report.gold_medal or report.silver_medal)


def _drop_first(sub):
    return sub.iloc[1:]


def _duplicate_first(sub):
    sub = sub.copy()
    sub.iloc[1, 0] = sub.iloc[0, 0]
    return sub


def _nan_first(sub):
    sub = sub.astype({"Transported": object})
    sub.iloc[0, 1] = None
    return sub


def _extra_column(sub):
    return sub.assign(Confidence=0.5)


def _missing_column(sub):
    return sub[["PassengerId"]]


def _unknown_id(sub):
    return pd.concat([sub, pd.DataFrame({"PassengerId": ["9999_99"], "Transported": [True]})])


@pytest.mark.parametrize(
    ("mutate", "must_name"),
    [
        (_drop_first, ["missing 1 PassengerId", "{id0}"]),
        (_duplicate_first, ["duplicate PassengerId", "{id0}", "missing 1 PassengerId", "{id1}"]),
        (_nan_first, ["NaN", "'Transported'", "{id0}"]),
        (_extra_column, ["unexpected column", "Confidence"]),
        (_missing_column, ["missing column", "Transported"]),
        (_unknown_id, ["not in the test set", "9999_99"]),
    ],
    ids=["missing-id", "duplicate-id", "nan", "extra-column", "missing-column", "unknown-id"],
)
def test_invalid_submission_names_the_problem(
    synthetic_data: Path, tmp_path: Path, mutate, must_name
):
    answers = _answers(synthetic_data)
    sub = answers[["PassengerId", "Transported"]].reset_index(drop=True)
    ids = {"id0": sub.loc[0, "PassengerId"], "id1": sub.loc[1, "PassengerId"]}
    report = grade_submission(COMP, _submit(mutate(sub), tmp_path), synthetic_data)
    _assert_invalid(report)
    assert report.submission_exists is True
    for text in must_name:
        assert text.format(**ids) in report.error


def test_missing_empty_and_non_csv_submissions(synthetic_data: Path, tmp_path: Path):
    missing = grade_submission(COMP, tmp_path / "nope.csv", synthetic_data)
    _assert_invalid(missing)
    assert missing.submission_exists is False and "does not exist" in missing.error

    (tmp_path / "empty.csv").write_text("")
    empty = grade_submission(COMP, tmp_path / "empty.csv", synthetic_data)
    _assert_invalid(empty)
    assert empty.submission_exists is True and "empty" in empty.error

    (tmp_path / "sub.txt").write_text("PassengerId,Transported\n")
    not_csv = grade_submission(COMP, tmp_path / "sub.txt", synthetic_data)
    _assert_invalid(not_csv)
    assert not_csv.submission_exists is False and ".csv" in not_csv.error


def test_report_has_exactly_mlebench_fields_plus_error(synthetic_data: Path, tmp_path: Path):
    answers = _answers(synthetic_data)
    report = grade_submission(
        COMP, _submit(answers[["PassengerId", "Transported"]], tmp_path), synthetic_data
    )
    assert tuple(GradingReport.model_fields) == (*MLEBENCH_REPORT_FIELDS, "error")
    mle = report.to_dict(mlebench_only=True)
    assert tuple(mle) == MLEBENCH_REPORT_FIELDS
    json.dumps(report.to_dict())  # JSON-compatible, created_at as ISO string
    with pytest.raises(pydantic.ValidationError):
        report.score = 0.0  # frozen


def test_grade_unprepared_or_unknown_competition_raises(tmp_path: Path):
    with pytest.raises(MLEBenchError, match="not prepared.*`mcgs mlebench prepare spaceship-titanic --raw RAW_DIR --out"):
        grade_submission(COMP, tmp_path / "s.csv", tmp_path)
    with pytest.raises(MLEBenchError, match="unknown MLE-bench competition 'nope'"):
        grade_submission("nope", tmp_path / "s.csv", tmp_path)


# --- (c) medal thresholds --------------------------------------------------------------------

# Leaderboard of N teams with distinct scores: higher-is-better team at rank r scores N + 1 - r,
# lower-is-better team at rank r scores r. Ranks by hand from Kaggle's progression rule:
#   N=50   (<100):     gold int(5.0)=5,         silver int(10.0)=10, bronze int(20.0)=20
#   N=150  (100-249):  gold 10,                 silver int(30.0)=30, bronze int(60.0)=60
#   N=500  (250-999):  gold 10 + int(1.0)=11,   silver 50,           bronze 100
#   N=1500 (>=1000):   gold 10 + int(3.0)=13,   silver int(75.0)=75, bronze int(150.0)=150
# median of 1..N = (N + 1) / 2.
@pytest.mark.parametrize(
    ("n", "ranks", "higher", "lower"),
    [
        (50, (5, 10, 20), (46, 41, 31, 25.5), (5, 10, 20, 25.5)),
        (150, (10, 30, 60), (141, 121, 91, 75.5), (10, 30, 60, 75.5)),
        (500, (11, 50, 100), (490, 451, 401, 250.5), (11, 50, 100, 250.5)),
        (1500, (13, 75, 150), (1488, 1426, 1351, 750.5), (13, 75, 150, 750.5)),
    ],
)
def test_medal_thresholds_by_team_count(n, ranks, higher, lower):
    keys = ("gold_threshold", "silver_threshold", "bronze_threshold", "median_threshold")
    rng = np.random.default_rng(n)
    assert medal_ranks(n) == ranks

    higher_scores = rng.permutation(np.arange(n, 0, -1).astype(float))
    assert medal_thresholds(higher_scores, lower_is_better=False) == dict(zip(keys, higher))

    lower_scores = rng.permutation(np.arange(1, n + 1).astype(float))
    assert medal_thresholds(lower_scores, lower_is_better=True) == dict(zip(keys, lower))


def test_medal_ranks_small_leaderboards_and_empty():
    assert medal_ranks(1) == (1, 1, 1)
    assert medal_ranks(7) == (1, 1, 2)
    assert medal_ranks(99) == (9, 19, 39)
    assert medal_ranks(100) == (10, 20, 40)
    assert medal_ranks(249) == (10, 49, 99)
    assert medal_ranks(250) == (10, 50, 100)
    assert medal_ranks(999) == (11, 50, 100)
    assert medal_ranks(1000) == (12, 50, 100)
    with pytest.raises(ValueError):
        medal_thresholds([], lower_is_better=False)


@pytest.mark.parametrize("lower_is_better", [False, True])
def test_tie_at_bronze_threshold_earns_bronze(lower_is_better):
    # 50 teams: bronze = rank 20. Ranks 19-22 tie at 0.7; better teams above, worse below.
    sign = -1.0 if lower_is_better else 1.0
    best_first = [sign * (0.9 - 0.001 * r) for r in range(18)] + [sign * 0.7] * 4
    best_first += [sign * (0.6 - 0.001 * r) for r in range(28)]
    t = medal_thresholds(best_first[::-1], lower_is_better)
    assert t["bronze_threshold"] == sign * 0.7

    at = medals_for_score(sign * 0.7, t, lower_is_better)
    assert at["bronze_medal"] and at["any_medal"]
    assert not (at["gold_medal"] or at["silver_medal"])

    worse = medals_for_score(sign * 0.7 - sign * 1e-9, t, lower_is_better)
    assert not (worse["bronze_medal"] or worse["any_medal"])

    # Ties at a higher threshold earn only that medal (medals are exclusive).
    gold = medals_for_score(t["gold_threshold"], t, lower_is_better)
    assert gold["gold_medal"] and not (gold["silver_medal"] or gold["bronze_medal"])

    # above_median is strict.
    assert not medals_for_score(t["median_threshold"], t, lower_is_better)["above_median"]
    assert medals_for_score(None, t, lower_is_better) == dict.fromkeys(
        ("gold_medal", "silver_medal", "bronze_medal", "any_medal", "above_median"), False
    )


# --- bad inputs to preparation ---------------------------------------------------------------


def test_prepare_unknown_competition_lists_known_ids(tmp_path: Path):
    with pytest.raises(MLEBenchError) as err:
        prepare_competition("titanic", tmp_path, tmp_path / "out")
    assert "'titanic'" in str(err.value)
    for known in competition_ids():
        assert known in str(err.value)
    assert isinstance(err.value, ValueError)


def test_prepare_missing_raw_folder_or_file(tmp_path: Path):
    with pytest.raises(MLEBenchError, match="raw folder .*nowhere.* does not exist"):
        prepare_competition(COMP, tmp_path / "nowhere", tmp_path / "out")
    (tmp_path / "raw").mkdir()
    with pytest.raises(MLEBenchError, match=r"raw file .*train\.csv.* is missing"):
        prepare_competition(COMP, tmp_path / "raw", tmp_path / "out")


def test_prepare_missing_mlebench_folder(tmp_path: Path):
    raw = _write_synthetic_source(tmp_path / "src")
    with pytest.raises(MLEBenchError, match="MLE-bench folder .*elsewhere"):
        prepare_competition(COMP, raw, tmp_path / "out", mlebench_dir=tmp_path / "elsewhere")


def test_prepare_checksum_mismatch_names_file_and_md5s(tmp_path: Path):
    bogus = "0" * 32
    raw = _write_synthetic_source(
        tmp_path / "src", checksums={"public": {"train.csv": bogus}, "zip": bogus}
    )
    out = tmp_path / "out"
    with pytest.raises(ChecksumMismatchError) as err:
        prepare_competition(COMP, raw, out)
    actual = _md5(out / COMP / "prepared" / "public" / "train.csv")
    message = str(err.value)
    assert "prepared/public/train.csv" in message and bogus in message and actual in message
    assert not (out / COMP / "config.yaml").exists()  # not marked as prepared
