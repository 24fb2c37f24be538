"""Forecasting tasks (issue 35): many steps ahead from a history, with fixed borders in time
order; loaded and checked (bad inputs named before the search), scored by the engine on the
validation windows, test windows forecast by the engine in forecast mode one window at a time
(the program never sees a value past the look-back it answers), the time-series leakage rules
of the code review, the search end to end on generated series, and ETTh1 / Weather prepared
with the Time-Series-Library protocol (real data)."""

from __future__ import annotations

import dataclasses
import pickle
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from mcgs.task import TaskError, load_task


def series_task(folder: Path, n: int = 1200, horizon: int = 24, borders=(800, 1000, 1200), lookback=(48, 96), seed: int = 0,
                extra: str = "") -> Path:
    """Three hourly series with a daily cycle, a random walk and a mix of both with a lag of
    three hours: a linear map of the look-back forecasts them well, persistence does not."""
    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True, exist_ok=True)
    t = np.arange(n)
    a = np.sin(2 * np.pi * t / 24) + 0.3 * rng.standard_normal(n)
    b = np.cumsum(0.05 * rng.standard_normal(n)) + 0.5 * np.cos(2 * np.pi * t / 24)
    c = 0.6 * np.roll(a, 3) + 0.4 * b + 0.2 * rng.standard_normal(n)
    pd.DataFrame({"date": pd.date_range("2021-01-01", periods=n, freq="h"), "a": a, "b": b, "c": c}).to_csv(folder / "series.csv", index=False)
    (folder / "task.yaml").write_text(
        f"metric: mse\nforecast:\n  time: date\n  horizon: {horizon}\n  lookback: {list(lookback)}\n"
        f"  borders: {{train: {borders[0]}, validation: {borders[1]}, test: {borders[2]}}}\n{extra}")
    return folder


def test_a_forecasting_task_loads_with_its_borders_windows_and_scaling(tmp_path):
    spec = load_task(series_task(tmp_path / "t"))
    f = spec.forecast
    assert spec.task_kind == "forecast" and spec.metric == "mse" and not spec.higher_is_better
    assert (f.train_end, f.validation_end, f.test_end, f.horizon, f.lookbacks) == (800, 1000, 1200, 24, [48, 96])
    assert f.inputs == f.targets == ["a", "b", "c"] and f.step == "h"
    assert list(f.validation_origins()) == list(range(800, 977))  # every origin whose horizon lies in the validation rows
    assert list(f.test_origins()) == list(range(1000, 1177)) and spec.n_test == 177
    raw = pd.read_csv(tmp_path / "t" / "series.csv")[["a", "b", "c"]].to_numpy()
    assert np.allclose(f.mean, raw[:800].mean(axis=0)) and np.allclose(f.std, raw[:800].std(axis=0))  # training rows only


def test_the_candidates_input_holds_the_training_and_validation_rows_only(tmp_path):
    from mcgs.contract import prepare_run_input

    spec = load_task(series_task(tmp_path / "t"))
    inp = prepare_run_input(spec, tmp_path / "run")
    history = pd.read_csv(inp / "history.csv")
    assert len(history) == 1000  # the 200 test rows never enter the input
    raw = pd.read_csv(tmp_path / "t" / "series.csv")
    scaled = (raw["a"][:1000] - spec.forecast.mean[0]) / spec.forecast.std[0]
    assert np.allclose(history["a"], scaled, atol=1e-5)
    task = __import__("json").loads((inp / "task.json").read_text())
    assert task["contract_version"] == "1.5" and task["outputs"] is None
    assert task["forecast"]["validation_origins"] == {"start": 800, "stop": 977, "step": 1}
    assert (inp / "mcgs_forecast.py").is_file()
    assert np.load(tmp_path / "run" / "private" / "series.npy").shape == (1200, 3)  # the engine's copy, outside the input


@pytest.mark.parametrize("case, message", [
    ("horizon", r"the horizon \(300\) is longer than the test part \(200 rows"),
    ("gap", r"has a gap at row 500: .* where every other step is"),
    ("missing", r"the series 'b' of series.csv has a missing value at row 7"),
    ("target", r"forecast.targets names 'z', which is not a column"),
    ("lookback", r"the look-back 900 needs more rows than the 800 training rows"),
    ("order", r"forecast.borders must satisfy"),
])
def test_bad_forecasting_inputs_are_named_before_the_search(tmp_path, case, message):
    folder = series_task(tmp_path / "t")
    frame = pd.read_csv(folder / "series.csv")
    yaml = (folder / "task.yaml").read_text()
    if case == "horizon":
        yaml = yaml.replace("horizon: 24", "horizon: 300")
    elif case == "gap":
        frame = frame.drop(index=500)
    elif case == "missing":
        frame.loc[7, "b"] = np.nan
    elif case == "target":
        yaml = yaml.replace("  time: date\n", "  time: date\n  targets: [z]\n")
    elif case == "lookback":
        yaml = yaml.replace("[48, 96]", "[48, 900]")
    elif case == "order":
        yaml = yaml.replace("validation: 1000", "validation: 700")
    frame.to_csv(folder / "series.csv", index=False)
    (folder / "task.yaml").write_text(yaml)
    with pytest.raises(TaskError, match=message):
        load_task(folder)


def test_a_gap_is_taken_as_a_step_when_the_task_allows_it(tmp_path):
    folder = series_task(tmp_path / "t", borders=(800, 1000, 1199), extra="  irregular_steps: allow\n")
    frame = pd.read_csv(folder / "series.csv").drop(index=500)
    frame.to_csv(folder / "series.csv", index=False)
    spec = load_task(folder)
    assert spec.forecast.n_rows == 1199 and spec.forecast.step is None


def _labels(spec, tmp_path):
    from mcgs.contract import prepare_run_input
    from mcgs.forecast import ForecastLabels

    prepare_run_input(spec, tmp_path / "run")
    return ForecastLabels(spec, np.load(tmp_path / "run" / "private" / "series.npy"))


def test_the_engine_scores_the_validation_forecasts_itself(tmp_path):
    from mcgs.evaluation import OutputError, evaluate_forecast

    spec = load_task(series_task(tmp_path / "t"))
    labels = _labels(spec, tmp_path)
    assert labels.y.shape == (177, 24, 3)
    ws = tmp_path / "ws"
    (ws / "working").mkdir(parents=True)
    pred = (labels.y + 0.5).astype(np.float32)
    np.save(ws / "working" / "val_forecast.npy", pred)
    assert evaluate_forecast(labels, ws).score == pytest.approx(0.25, abs=1e-6)
    np.save(ws / "working" / "val_forecast.npy", pred[:-1])
    with pytest.raises(OutputError, match=r"has shape \(176, 24, 3\); the contract asks for .* \(177, 24, 3\)"):
        evaluate_forecast(labels, ws)
    pred[3, 2, 1] = np.nan
    np.save(ws / "working" / "val_forecast.npy", pred)
    with pytest.raises(OutputError, match="1 values that are not finite .first in window 3"):
        evaluate_forecast(labels, ws)
    np.save(ws / "working" / "val_forecast.npy", np.array([{"a": 1}], dtype=object), allow_pickle=True)
    with pytest.raises(OutputError, match="is not a NumPy array file"):  # never unpickled
        evaluate_forecast(labels, ws)


# A forecast-mode program that checks, after each window, that nothing more can be read (the
# engine sends a window only after the answer to the one before), and logs what it saw.
PEEKING = '''
import fcntl, json, os, struct, sys
import numpy as np
rfd, wfd = (int(x) for x in os.environ["MCGS_FORECAST_FDS"].split(","))
os.write(wfd, struct.pack("<i", int(sys.argv[1]) if len(sys.argv) > 1 else 48))
n, lb, c = struct.unpack("<iii", os.read(rfd, 12))
log = {"n": n, "lookback": lb, "inputs": c, "ahead": 0, "windows": []}
for i in range(n):
    need, got = lb * c * 4, b""
    while len(got) < need:
        got += os.read(rfd, need - len(got))
    w = np.frombuffer(got, dtype="<f4").reshape(lb, c)
    fl = fcntl.fcntl(rfd, fcntl.F_GETFL)
    fcntl.fcntl(rfd, fcntl.F_SETFL, fl | os.O_NONBLOCK)
    try:
        log["ahead"] += len(os.read(rfd, 1 << 16))
    except BlockingIOError:
        pass
    fcntl.fcntl(rfd, fcntl.F_SETFL, fl)
    log["windows"].append([float(w[0, 0]), float(w[-1, 0])])
    os.write(wfd, np.repeat(w[-1:], 24, axis=0).astype("<f4").tobytes())
json.dump(log, open("working/log.json", "w"))
'''


def test_forecast_mode_feeds_one_window_at_a_time_and_nothing_past_its_look_back(tmp_path):
    from mcgs.forecast import WindowFeed
    from mcgs.sandbox import Outcome, SandboxLimits, run_program

    values = np.random.default_rng(0).standard_normal((400, 3)).astype(np.float32)
    ws = tmp_path / "ws"
    (ws / "working").mkdir(parents=True)
    (ws / "solution.py").write_text(PEEKING)
    origins = range(300, 377)
    feed = WindowFeed(values, origins, 24, 3, [48, 96])
    result = run_program(ws, "solution.py", SandboxLimits(timeout_s=60), feed=feed)
    assert result.outcome is Outcome.OK, result.stderr_tail
    pred = feed.result()
    log = __import__("json").loads((ws / "working" / "log.json").read_text())
    assert log["ahead"] == 0  # never a byte of the next window before this one was answered
    assert (log["n"], log["lookback"], log["inputs"]) == (77, 48, 3)
    assert [w[1] for w in log["windows"]] == pytest.approx([float(values[t - 1, 0]) for t in origins])  # the last row before t
    assert [w[0] for w in log["windows"]] == pytest.approx([float(values[t - 48, 0]) for t in origins])  # 48 rows, no more
    assert pred.shape == (77, 24, 3) and np.allclose(pred[:, 0], values[np.asarray(origins) - 1])
    # a look-back the task does not allow ends the exchange, with the reason
    feed = WindowFeed(values, origins, 24, 3, [48, 96])
    run_program(ws, "solution.py", SandboxLimits(timeout_s=60), args=["60"], feed=feed)
    with pytest.raises(Exception, match=r"asked for a look-back of 60 rows; the task allows \[48, 96\]"):
        feed.result()


def test_a_program_that_asks_for_the_time_gets_each_window_s_first_forecast_time(tmp_path):
    """Calendar features: serve(..., with_time=True) hands the program, with each window, the
    time of its first forecast row (the engine's origin_times); a program that does not ask gets
    the look-backs alone (the test above)."""
    import shutil

    import mcgs.forecast_client
    from mcgs.forecast import WindowFeed, origin_times
    from mcgs.sandbox import Outcome, SandboxLimits, run_program

    spec = load_task(series_task(tmp_path / "t")).forecast
    origins = range(1000, 1010)
    times = origin_times(tmp_path / "t", spec, origins)
    assert times[0] == int(pd.Timestamp("2021-01-01").timestamp()) + 1000 * 3600  # row 1000 of an hourly series
    assert origin_times(tmp_path / "t", spec, [1200])[0] == times[0] + 200 * 3600  # after the last row: one step on
    ws = tmp_path / "ws"
    (ws / "input").mkdir(parents=True)
    shutil.copyfile(mcgs.forecast_client.__file__, ws / "input" / "mcgs_forecast.py")
    (ws / "solution.py").write_text(
        "import sys\nimport numpy as np\nsys.path.insert(0, 'input')\nfrom mcgs_forecast import serve\n"
        "serve(lambda w, when: np.full((24, 3), when / 3600.0), 48, 24, 3, with_time=True)\n")
    values = np.zeros((1200, 3), dtype=np.float32)
    feed = WindowFeed(values, origins, 24, 3, [48, 96], times=times)
    result = run_program(ws, "solution.py", SandboxLimits(timeout_s=60), feed=feed)
    assert result.outcome is Outcome.OK, result.stderr_tail
    assert np.allclose(feed.result()[:, 0, 0], times / 3600.0)


def test_the_code_review_refuses_time_series_leakage_and_missing_forecast_outputs():
    from operators.code_review import review_program

    head = ('import json, sys\nimport numpy as np\nimport pandas as pd\nfrom sklearn.preprocessing import StandardScaler\n'
            'TASK = json.load(open("input/task.json"))\nFC = TASK["forecast"]\nhistory = pd.read_csv(FC["history"])\n'
            'values = history[FC["input_columns"]].to_numpy()\n')
    tail = 'np.save(FC["output"], np.zeros(1))\nsys.path.insert(0, "input")\nfrom mcgs_forecast import serve\n'
    clean = review_program(head + 'train = values[: FC["train_rows"]]\nscaler = StandardScaler().fit(train)\n' + tail, forecast=True)
    assert clean.verdict == "passed", clean.reasons
    leaky = review_program(head + 'scaler = StandardScaler().fit(values)\nmu = history.mean()\n' + tail, forecast=True)
    assert leaky.verdict == "rejected"
    assert any(".fit on the whole history" in r for r in leaky.reasons) and any(".mean() over the whole history" in r for r in leaky.reasons)
    silent = review_program(head + 'train = values[:100]\n', forecast=True)
    assert any("never writes working/val_forecast.npy" in r for r in silent.reasons)
    assert any("never serves forecast mode" in r for r in silent.reasons)


@pytest.mark.parametrize("model", ["model.forecast_linear", "model.forecast_seasonal_naive", "model.forecast_patch_mlp",
                                   "model.forecast_lightgbm"])
def test_every_forecasting_recipe_passes_the_review_and_writes_its_validation_forecasts(tmp_path, model):
    if model == "model.forecast_patch_mlp":
        pytest.importorskip("torch")
    from recipe_runs import run_recipe

    from mcgs.coders.recipe_config import default_config, render_program
    from mcgs.profile import profile_task
    from operators.code_review import review_program

    spec = load_task(series_task(tmp_path / "t"))
    profile = profile_task(spec)
    config = default_config(model, profile)
    if model == "model.forecast_patch_mlp":
        config["params"]["epochs"] = 3
    code, ids = render_program(config, title="t", plan="p", profile=profile)
    assert review_program(code, forecast=True).verdict == "passed"
    ev, out, ids = run_recipe(spec, config, tmp_path / "w", env={"PATH": "/usr/bin:/bin", "OMP_NUM_THREADS": "1"})
    assert model in ids and "look-back" in out
    assert ev.oof.shape == (177, 24 * 3)
    if model == "model.forecast_seasonal_naive":
        assert profile["forecast"]["seasonal_period"] == 24 and config["params"]["period"] == 24
    if model == "model.forecast_lightgbm":
        assert "periods [24]" in out  # a day of hourly rows; a week (168) is longer than the look-back of 96
    assert ev.score < 0.9  # persistence of the last value scores about 1.3 here


@pytest.mark.slow
def test_the_search_forecasts_the_test_windows_in_forecast_mode_with_the_chosen_node(tmp_path):
    from mcgs.forecast_mode import forecast_windows, write_test_forecast
    from mcgs.node import Operator
    from mcgs.search import create_search
    from mcgs.settings import SearchSettings

    spec = load_task(series_task(tmp_path / "t"))
    settings = SearchSettings(time_budget_s=600, max_nodes=4, seed=0, cpu_threads=1)
    search = create_search(spec, tmp_path / "run", settings=settings)
    final = search.run()
    assert final is not None
    best = tmp_path / "run" / "best"
    pred = np.load(best / "test_forecast.npy")
    assert pred.shape == (177, 24, 3) and pred.dtype == np.float32
    score = __import__("json").loads((best / "test_score.json").read_text())
    assert score["node"] == final.seq
    values = np.load(tmp_path / "run" / "private" / "series.npy")
    origins = np.arange(1000, 1177)
    truth = values[origins[:, None] + np.arange(24)[None, :]]
    assert score["scores"]["mse"] == pytest.approx(float(np.mean((pred - truth) ** 2)), rel=1e-5)
    persistence = float(np.mean((values[origins - 1][:, None, :] - truth) ** 2))
    assert score["scores"]["mse"] < 0.6 * persistence
    from mcgs.report import render_report

    assert f"Test windows: 177, forecast by node {final.seq} in forecast mode; test mse {score['scores']['mse']:.4f}" in render_report(search)
    # a linear node's forecast-mode answers are its fitted model's, run on every window at once outside the sandbox
    linear = [n for n in search.nodes() if n.is_valid and n.config.get("model") == "model.forecast_linear"][0]
    answers, lookback = forecast_windows(search, linear, origins)
    model = pickle.loads((search.node_dir(linear) / "working" / "model" / "model.pkl").read_bytes())
    rows = values[origins[:, None] + np.arange(-lookback, 0)[None, :]]  # (windows, L, 3)
    xs = np.transpose(rows, (0, 2, 1)).reshape(-1, lookback).astype(np.float32)
    design = np.concatenate([xs - xs[:, -1:], np.ones((len(xs), 1), np.float32)], axis=1)
    direct = np.transpose((design @ model["w"] + xs[:, -1:]).reshape(177, 3, 24), (0, 2, 1))
    assert lookback in (48, 96) and np.allclose(answers, direct, atol=1e-4)
    # every recipe answers a window in forecast mode as it forecast it in search mode (calendar features included)
    val_origins = search.task.forecast.validation_origins()
    for node in (n for n in search.nodes() if n.is_valid and n.operator is not Operator.ENSEMBLE and n.operator.value == "draft"):
        val = np.load(search.node_dir(node) / "working" / "val_forecast.npy")
        assert np.allclose(forecast_windows(search, node, val_origins)[0], val, atol=1e-4), node.config.get("model")
    assert {"model.forecast_linear", "model.forecast_lightgbm"} <= {n.config.get("model") for n in search.nodes()}
    # an ensemble's test windows: every member's own program in forecast mode, blended by the engine
    a, b = [n for n in search.nodes() if n.is_valid and n.operator is not Operator.ENSEMBLE][:2]
    ensemble = dataclasses.replace(final, operator=Operator.ENSEMBLE, config={"weights": {str(a.id): 3, str(b.id): 1}})
    out = write_test_forecast(search, ensemble)
    blended = np.load(best / "test_forecast.npy")
    members = [forecast_windows(search, n, origins)[0] for n in (a, b)]
    assert np.allclose(blended, (3 * members[0] + members[1]) / 4, atol=1e-5)
    assert set(out["lookback"]) == {a.seq, b.seq}
    # a run whose test forecast is missing (forecast mode failed at its end): resume forecasts it
    from typer.testing import CliRunner

    from mcgs.cli import app

    (best / "test_forecast.npy").unlink()
    res = CliRunner().invoke(app, ["resume", str(tmp_path / "run")])
    assert res.exit_code == 0, res.output
    assert f"test forecast is missing: forecasting the test windows with node {final.seq}" in " ".join(res.output.split())
    assert np.allclose(np.load(best / "test_forecast.npy"), pred, atol=1e-6)
    res = CliRunner().invoke(app, ["resume", str(tmp_path / "run")])  # nothing left to do: said as before
    assert res.exit_code != 0 and "give a larger total with" in " ".join(res.output.split())
    # a member that fails in forecast mode is said and left out; the others carry the forecast
    program = search.node_dir(b) / "solution.py"
    program.write_text("import os, sys\nif os.environ.get('MCGS_MODE') == 'forecast':\n    sys.exit('broken model file')\n" + program.read_text())
    said = []
    search.say = said.append
    out = write_test_forecast(search, ensemble)
    assert np.allclose(np.load(best / "test_forecast.npy"), members[0], atol=1e-5) and set(out["lookback"]) == {a.seq}
    assert any(f"without member {b.seq} (weight 1)" in s and "broken model file" in s for s in said), said


def test_forecast_grading_checks_the_shape(tmp_path):
    from mcgs.protocols import ProtocolError
    from mcgs.protocols.tslib import grade_forecast

    answers = {"values": np.arange(40, dtype=np.float32).reshape(20, 2), "horizon": np.array(5)}
    perfect = np.stack([answers["values"][i: i + 5] for i in range(16)])
    assert grade_forecast(perfect, answers) == {"mse": 0.0, "mae": 0.0}
    assert grade_forecast(perfect + 2, answers)["mse"] == pytest.approx(4.0)
    with pytest.raises(ProtocolError, match=r"shape \(15, 5, 2\); the protocol has \(16, 5, 2\)"):
        grade_forecast(perfect[1:], answers)


@pytest.mark.realdata
@pytest.mark.parametrize("name, raw, rows, windows, series", [("etth1-96", "etth1", 14400, 2785, 7), ("weather-720", "tslib-weather", 52696, 9820, 21)])
def test_tslib_data_sets_are_prepared_with_their_protocol_borders(shared_data, tmp_path, name, raw, rows, windows, series):
    from mcgs.protocols import grade_protocol, prepare_protocol

    task_dir = prepare_protocol(name, shared_data / raw / "raw", tmp_path)
    spec = load_task(task_dir)
    f = spec.forecast
    assert f.n_rows == rows and spec.n_test == windows and len(f.inputs) == series  # SOURCE.md's window counts
    answers = np.load(tmp_path / "answers.npz")
    assert answers["values"].shape == (rows - f.validation_end, series)
    # persistence (repeat the last value) as SOURCE.md measures it: ETTh1 H=96 MSE 1.294 / MAE 0.713
    values = (pd.read_csv(task_dir / "series.csv").drop(columns=["date"]).to_numpy() - f.mean) / f.std
    last = values[np.asarray(f.test_origins()) - 1][:, None, :].repeat(f.horizon, axis=1).astype(np.float32)
    np.save(tmp_path / "persist.npy", last)
    scores = grade_protocol(name, tmp_path / "persist.npy", tmp_path / "answers.npz")
    if name == "etth1-96":
        assert scores["mse"] == pytest.approx(1.294, abs=0.002) and scores["mae"] == pytest.approx(0.713, abs=0.002)
    else:
        assert scores["mse"] == pytest.approx(0.465, abs=0.002) and scores["mae"] == pytest.approx(0.394, abs=0.002)


# --- requests and export -------------------------------------------------------------------------


def _history(folder: Path, n: int = 1200) -> Path:
    """The generated series of :func:`series_task` as a bare history (no task.yaml): a data
    folder a person points a request at."""
    series_task(folder, n=n)
    (folder / "task.yaml").unlink()
    return folder


def test_a_forecast_request_becomes_a_forecasting_task(tmp_path):
    from mcgs.request import parse_request, task_from_request

    data = _history(tmp_path / "data")
    spec, parsed = task_from_request("Forecast the next 2 days of c", data, tmp_path / "task")
    f = spec.forecast
    assert spec.task_kind == "forecast" and spec.metric == "mse"
    assert f.targets == ["c"] and f.inputs == ["a", "b", "c"] and f.time == "date"
    assert f.horizon == 48 and f.test_end is None and f.test_origins() == range(1200, 1201)  # hourly rows: 2 days are 48 steps
    assert f.train_end == 960 and f.validation_end == 1200 and 48 in f.lookbacks and max(f.lookbacks) <= (960 - 48) // 2
    assert any("horizon: 48 steps" in note for note in parsed.notes)
    every = parse_request("forecast every series 24 steps ahead, scored by MAE", data)
    assert every.ok and every.forecast["targets"] == ["a", "b", "c"] and every.forecast["horizon"] == 24 and every.request.metric == "mae"


@pytest.mark.parametrize("prompt, n, field, fix", [
    ("forecast the next 90 minutes of c", 1200, "horizon", "whole number of steps"),   # 1.5 hourly steps
    ("forecast c", 1200, "horizon", "how far ahead"),
    ("forecast the next 24 hours", 1200, "target", "name the series"),                # three series, none named
    ("forecast the next 48 hours of c", 200, "horizon", "too few"),                  # 200 rows for a 48-step forecast
])
def test_a_forecast_request_that_lacks_a_fact_says_which_and_how_to_add_it(tmp_path, prompt, n, field, fix):
    from mcgs.request import parse_request

    parsed = parse_request(prompt, _history(tmp_path / "data", n=n))
    assert not parsed.ok
    problem = parsed.problems[0]
    assert problem.field == field and fix in str(problem)


@pytest.mark.slow
def test_an_exported_forecasting_node_forecasts_a_history_as_the_run_did_and_the_report_draws_it(tmp_path):
    import subprocess
    import sys

    import mcgs
    from mcgs.export import ExportError, export_node
    from mcgs.request import task_from_request
    from mcgs.search import create_search
    from mcgs.settings import SearchSettings

    spec, _ = task_from_request("forecast the next 24 hours of a and c", _history(tmp_path / "data"), tmp_path / "task")
    search = create_search(spec, tmp_path / "run", settings=SearchSettings(time_budget_s=600, max_nodes=2, seed=0, cpu_threads=1))
    search.run()
    run_forecast = pd.read_csv(tmp_path / "run" / "best" / "submission.csv")
    assert list(run_forecast.columns) == ["date", "a", "c"] and len(run_forecast) == 24
    assert run_forecast["date"].iloc[0] == "2021-02-20 00:00:00"  # the hour after the 1200th row
    run = mcgs.load_run(tmp_path / "run", details=True)
    from mcgs.report import write_report

    page = write_report(run, tmp_path / "report.html").read_text()
    assert "<h2>Forecast</h2>" in page and "The forecast of the next 24 steps (best/submission.csv)" in page
    result = export_node(run, tmp_path / "model")
    out = result.path
    assert {"forecast.py", "forecast.json", "example_history.csv", "MODEL_CARD.md"} <= {p.name for p in out.iterdir()}
    assert "ms per forecast" in (out / "MODEL_CARD.md").read_text()
    # the export, run as a user runs it (no mcgs import), on the run's own history in its own units
    res = subprocess.run([sys.executable, "forecast.py", str(tmp_path / "data" / "series.csv"), str(tmp_path / "f.csv")], cwd=out,
                         capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    exported = pd.read_csv(tmp_path / "f.csv")
    assert list(exported["date"]) == list(run_forecast["date"])
    assert np.allclose(exported[["a", "c"]].to_numpy(), run_forecast[["a", "c"]].to_numpy(), atol=1e-4)
    # a history too short for the look-back, or without a series, is named
    short = tmp_path / "short.csv"
    pd.read_csv(tmp_path / "data" / "series.csv").head(10).to_csv(short, index=False)
    res = subprocess.run([sys.executable, "forecast.py", str(short), str(tmp_path / "g.csv")], cwd=out, capture_output=True, text=True)
    assert res.returncode != 0 and "the history has 10" in res.stderr
    res = subprocess.run([sys.executable, "forecast.py", str(tmp_path / "data" / "series.csv")], cwd=out, capture_output=True, text=True)
    assert res.returncode != 0 and "usage" in res.stderr
    with pytest.raises(ExportError, match="exists and is not an earlier mcgs export"):
        export_node(run, tmp_path / "data")


def test_the_llm_prompt_of_a_forecasting_task_states_its_contract_not_the_tables(tmp_path):
    """A language model writing for a forecasting task is told contract 1.5's forecast entry
    (history, validation windows, forecast mode over the window protocol), not folds and OOF
    tables it does not have."""
    from mcgs.coders import CoderRequest
    from mcgs.coders.anthropic import AnthropicCoder
    from mcgs.coders.recipe import RecipeCoder
    from mcgs.llm import AnthropicClient
    from mcgs.node import Operator
    from mcgs.profile import profile_task
    from mcgs.settings import SearchSettings

    spec = load_task(series_task(tmp_path / "t"))
    settings = SearchSettings(coder="anthropic")
    coder = AnthropicCoder(settings, fallback=RecipeCoder(), client=AnthropicClient(settings.llm, api_key="test-key"))
    text = coder.system_prompt(CoderRequest(operator=Operator.DRAFT, task=spec, profile=profile_task(spec)))
    assert "forecasting task (contract 1.5)" in text and "working/val_forecast.npy" in text and "serve(forecast, L)" in text
    assert "lookbacks" in text and "[48, 96]" in text and "train_rows` (800)" in text
    assert "working/oof.csv" not in text and "input/folds.csv" not in text
