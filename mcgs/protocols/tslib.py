"""Long-horizon forecasting with the Time-Series-Library protocol: ETTh1 and Weather.

The protocol (thuml/Time-Series-Library ``data_provider/data_loader.py``, as the data sets'
SOURCE.md record it): fixed row borders in time order, every series standardised with the
mean and standard deviation of the training rows, features ``M`` (every series in, every series
out), every stride-1 window whose horizon lies in the test rows, MSE and MAE on the standardised
values averaged over windows, steps and series. Published tables use a look-back of 96; here
the search may choose 96 to 720 (``forecast.lookback``), and the report says which it chose.

* ``etth1-H``: ETTh1 (hourly, 7 series); rows 0..8640 train, ..11520 validation, ..14400 test
  (months of 30 days; the rows after 14400 are not used).
* ``weather-H``: Weather (every 10 minutes, 21 series; raw folder ``tslib-weather``); 70 / 10 /
  20 % of the 52 696 rows; the file has one repeated time and one 100-minute gap, which the
  protocol keeps (``irregular_steps: allow``).

``H`` is the horizon: 96, 192, 336 or 720. The task folder holds the series up to the last test
row (the engine feeds test windows from it; candidates read only the training and validation
rows); ``answers.npz`` holds the test rows' standardised values for grading.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from mcgs.protocols import Protocol, ProtocolError

__all__ = ["PROTOCOLS", "grade_forecast"]

HORIZONS = (96, 192, 336, 720)
LOOKBACKS = [96, 192, 336, 512, 720]


def _read_raw(raw: Path, member: str):
    import pandas as pd

    path = raw / member
    if not path.is_file():
        raise ProtocolError(f"{raw} has no {member}; give the data set's raw folder (e.g. ../shared/data/etth1/raw)")
    return pd.read_csv(path)


def _borders(name: str, n: int) -> tuple[int, int, int]:
    if name == "etth1":
        return 12 * 30 * 24, 16 * 30 * 24, 20 * 30 * 24
    train, test = int(n * 0.7), int(n * 0.2)
    return train, n - test, n


def _prepare(name: str, member: str, horizon: int):
    def prepare(raw: Path, task_dir: Path, answers_path: Path) -> None:
        frame = _read_raw(raw, member)
        train, val, test = _borders(name, len(frame))
        frame = frame.iloc[:test]
        frame.to_csv(task_dir / "series.csv", index=False)
        values = frame.drop(columns=["date"]).to_numpy(dtype=np.float64)
        mean, std = values[:train].mean(axis=0), values[:train].std(axis=0)
        np.savez_compressed(answers_path.with_suffix(".npz"), values=((values[val:test] - mean) / std).astype(np.float32),
                            horizon=horizon)
        import yaml

        forecast = {"time": "date", "horizon": horizon, "lookback": LOOKBACKS, "borders": {"train": train, "validation": val, "test": test}}
        if name == "weather":  # the protocol keeps the file's repeated time and its 100-minute gap
            forecast["irregular_steps"] = "allow"
        task = {"name": f"{name}-{horizon}", "metric": "mse", "forecast": forecast,
                "description": f"Forecast every series of {name} {horizon} steps ahead (Time-Series-Library protocol: standardised "
                               f"values, features M, every stride-1 test window, MSE)."}
        (task_dir / "task.yaml").write_text(yaml.safe_dump(task, sort_keys=False))

    return prepare


def grade_forecast(submission: np.ndarray, answers) -> dict[str, float]:
    """MSE and MAE of test forecasts ``(windows, horizon, series)`` against ``answers.npz``.

    Raises:
        ProtocolError: the forecasts' shape is not the protocol's.
    """
    from mcgs.forecast import window_targets
    from mcgs.forecast_mode import forecast_scores

    values, horizon = answers["values"].astype(np.float64), int(answers["horizon"])
    n = len(values) - horizon + 1
    if submission.shape != (n, horizon, values.shape[1]):
        raise ProtocolError(f"the forecasts have shape {submission.shape}; the protocol has {(n, horizon, values.shape[1])} "
                            f"(windows, horizon, series): give RUN_DIR/best/test_forecast.npy of a run on this task")
    return forecast_scores(window_targets(values, range(n), horizon, list(range(values.shape[1]))), submission)


PROTOCOLS = tuple(
    Protocol(name=f"{name}-{h}", description=f"{name}: forecast every series {h} steps ahead (Time-Series-Library protocol, MSE/MAE)",
             prepare=_prepare(name, member, h), grade=grade_forecast, metric="mse (lower is better)", raw_name=raw_name,
             answers="answers.npz")
    for name, member, raw_name in (("etth1", "ETTh1.csv", "etth1"), ("weather", "weather.zip", "tslib-weather"))
    for h in HORIZONS
)
