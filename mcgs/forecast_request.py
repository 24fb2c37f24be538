"""Requests for a forecast: "forecast the next 96 hours of OT" on a folder holding one series.

:func:`mcgs.request.parse_request` hands a request here when the data folder has no training
table but one history (``series.csv``, or the folder's only CSV or zipped CSV) and the request
asks how far ahead to look. This module reads, by rules:

* the **horizon**: "the next 96 hours", "14 days ahead", "a horizon of 96 steps"; a time unit is
  turned into rows with the history's own step (hourly rows and "the next 2 days": 48), and a
  horizon that is not a whole number of steps is a problem that says the step;
* the **time column**: a column named like a time (``date``, ``time``, ``timestamp``, ``ds``) or,
  else, the first whose values parse as times;
* the **targets**: the series the request names (``OT``), every numeric series when it says
  "all series" / "every column" / "multivariate", the only one when there is one; what a
  language model read fills the gap when the rules find none;
* the **metric**: MSE unless the request names MAE or RMSE;
* the **borders**: the last fifth of the history validates (at least two horizons of rows), the
  rest trains; there is no test part, so the forecast is the future after the last row;
* the **look-backs** a candidate may choose: the usual long-horizon ones (96 .. 720) with one to
  four horizons, those the training rows can feed.

The result is a ``forecast`` entry for ``task.yaml`` (:class:`mcgs.forecast.ForecastSetting`);
:mod:`mcgs.forecast` checks it against the whole history when the task loads.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mcgs.request import ParsedRequest

__all__ = ["find_horizon", "find_series_file", "parse_forecast_request", "SERIES_FILES"]

#: File stems taken as a history to forecast, in order of preference.
SERIES_FILES = ("series", "history", "timeseries", "time_series")
#: Column names taken as the time column without looking at their values.
TIME_NAMES = ("date", "time", "timestamp", "datetime", "ds", "period")
#: Look-backs (rows) offered besides one to four horizons: the long-horizon benchmarks' set.
STANDARD_LOOKBACKS = (96, 192, 336, 512, 720)
#: Share of the history that validates; at least two horizons of rows.
VALIDATION_SHARE = 0.2

_UNITS_S = {
    "second": 1.0, "minute": 60.0, "min": 60.0, "hour": 3600.0, "h": 3600.0, "day": 86400.0, "week": 7 * 86400.0,
    "month": 30.436875 * 86400.0, "quarter": 91.310625 * 86400.0, "year": 365.2425 * 86400.0,
}
_STEP_UNITS = ("step", "row", "point", "period", "observation", "value", "timestep", "sample")
_UNIT_RE = r"(seconds?|minutes?|mins?|hours?|h|days?|weeks?|months?|quarters?|years?|steps?|rows?|points?|periods?|observations?|values?|timesteps?|time steps?|samples?)"
_HORIZON_PATTERNS = (
    rf"\bnext\s+(\d+)\s*{_UNIT_RE}\b",
    rf"\b(\d+)\s*{_UNIT_RE}\s+(?:ahead|into the future|forward|out)\b",
    rf"\bhorizon\s+(?:of\s+)?(\d+)\s*{_UNIT_RE}?\b",
)
_ALL_SERIES = r"\b(all|every|each)\s+(?:of\s+the\s+)?(series|columns?|variables?|signals?|sensors?)\b|\bmultivariate\b"


def find_horizon(prompt: str) -> tuple[int, str | None] | None:
    """``(count, unit)`` of the horizon the request asks for (``unit`` singular, None for a bare
    "horizon of 96"), or None when it names none."""
    low = prompt.lower()
    for pattern in _HORIZON_PATTERNS:
        m = re.search(pattern, low)
        if m:
            unit = m.group(2) if m.lastindex and m.lastindex >= 2 else None
            if unit is not None:
                unit = unit.replace("time step", "timestep").rstrip("s") if unit not in ("h",) else "h"
                unit = {"min": "minute", "timestep": "step"}.get(unit, unit)
            return int(m.group(1)), unit
    return None


def find_series_file(data_dir: Path) -> str | None:
    """The history in ``data_dir``: ``series.csv`` (or another :data:`SERIES_FILES` stem), else
    the folder's only ``.csv`` or ``.zip`` file; None when there is none or several."""
    for stem in SERIES_FILES:
        for suffix in (".csv", ".zip"):
            if (data_dir / f"{stem}{suffix}").is_file():
                return f"{stem}{suffix}"
    files = [p.name for p in sorted(data_dir.iterdir()) if p.is_file() and p.suffix.lower() in (".csv", ".zip")
             and not p.name.startswith("sample_submission")]
    return files[0] if len(files) == 1 else None


def _time_column(frame) -> str | None:
    import pandas as pd

    for c in frame.columns:
        if str(c).strip().lower() in TIME_NAMES:
            return str(c)
    for c in frame.columns:
        if frame[c].dtype == object:
            parsed = pd.to_datetime(frame[c], errors="coerce", format="mixed")
            if parsed.notna().mean() > 0.95:
                return str(c)
    return None


def _step_seconds(times) -> float | None:
    """The median step between consecutive times, seconds; None when it cannot be measured."""
    import numpy as np
    import pandas as pd

    parsed = pd.to_datetime(times, errors="coerce", format="mixed").dropna()
    if len(parsed) < 3:
        return None
    diffs = np.diff(parsed.to_numpy().astype("datetime64[s]").astype(np.int64))
    diffs = diffs[diffs > 0]
    return float(np.median(diffs)) if len(diffs) else None


def _horizon_rows(count: int, unit: str | None, step_s: float | None, out: "ParsedRequest") -> int | None:
    from mcgs.request import RequestProblem

    if unit is None or unit in _STEP_UNITS:
        return count
    if step_s is None:
        out.problems.append(RequestProblem("horizon", f"the request asks for {count} {unit}(s) but the history's time step "
                                           "cannot be measured", "give the horizon in steps: 'forecast the next 96 steps'"))
        return None
    rows = count * _UNITS_S[unit] / step_s
    if rows < 1 or abs(rows - round(rows)) > 0.05 * max(1.0, rows):
        out.problems.append(RequestProblem("horizon", f"{count} {unit}(s) is {rows:.2f} steps of this history "
                                           f"(one step is {_describe_seconds(step_s)})",
                                           "give the horizon as a whole number of steps: 'forecast the next N steps'"))
        return None
    return int(round(rows))


def _describe_seconds(s: float) -> str:
    for name, size in (("day", 86400.0), ("hour", 3600.0), ("minute", 60.0)):
        if s >= size:
            return f"{s / size:g} {name}(s)"
    return f"{s:g} s"


def _targets(prompt: str, frame, time_col: str, series_file: str, out: "ParsedRequest", reading) -> list[str] | None:
    """The series to forecast: named in the request, every one ("all series"), the model's
    reading, or the only one; None with a problem when none of these says."""
    import pandas as pd

    from mcgs.request import RequestProblem, _mentioned_columns

    numeric = [str(c) for c in frame.columns if c != time_col and pd.api.types.is_numeric_dtype(frame[c])]
    if not numeric:
        out.problems.append(RequestProblem("target", f"{series_file} has no numeric series besides {time_col!r}",
                                           "put one numeric column per series in the history"))
        return None
    targets = _mentioned_columns(prompt, numeric)
    if re.search(_ALL_SERIES, prompt.lower()):
        targets, how = numeric, "the request asks for every series"
    elif targets:
        how = "named in the request"
    elif reading is not None and reading.target and all(t in numeric for t in reading.target):
        targets, how = list(reading.target), "read by the model"
    elif len(numeric) == 1:
        targets, how = numeric, "the history's only series"
    else:
        out.problems.append(RequestProblem("target", f"the request names none of the {len(numeric)} series of {series_file} "
                                           f"({', '.join(numeric[:12])})", "name the series to forecast ('... of OT'), or say 'all series'"))
        return None
    out.notes.append(f"forecast: {', '.join(targets[:8])}{' ...' if len(targets) > 8 else ''} ({how}); time column {time_col!r}")
    return targets


def parse_forecast_request(prompt: str, data_dir: Path, series_file: str, out: "ParsedRequest", reading=None) -> dict[str, Any] | None:
    """Read a forecast request on ``data_dir/series_file`` (module docstring).

    Args:
        prompt: The request.
        data_dir: The data folder.
        series_file: The history's file name in it (:func:`find_series_file`).
        out: The :class:`~mcgs.request.ParsedRequest` whose ``problems`` and ``notes`` grow and
            whose ``request`` is filled (task kind ``forecast``, target, time column, metric).
        reading: What a language model read (:class:`~mcgs.request.RequestReading`), or None.

    Returns:
        The ``forecast`` entry for ``task.yaml``, or None when ``out.problems`` says what is
        missing.
    """
    import pandas as pd

    from mcgs.request import RequestProblem, find_metrics

    req, notes = out.request, out.notes
    req.task_kind = "forecast"
    req.train_file = series_file
    try:
        frame = pd.read_csv(data_dir / series_file)
    except (ValueError, OSError) as exc:
        out.problems.append(RequestProblem("data", f"{series_file} cannot be read as CSV ({type(exc).__name__}: {str(exc)[:120]})",
                                           "save the history as a UTF-8 CSV with a header row: a time column, then one column per series"))
        return None
    time_col = req.time_column if req.time_column in frame.columns else _time_column(frame)
    if time_col is None and reading is not None and reading.time_column in frame.columns:
        time_col = reading.time_column
    if time_col is None:
        out.problems.append(RequestProblem("time_column", f"no column of {series_file} holds times "
                                           f"(columns: {', '.join(map(str, frame.columns[:12]))})",
                                           "name the time column 'date' or say which it is: 'the time is in column T'"))
        return None
    req.time_column = time_col
    targets = _targets(prompt, frame, time_col, series_file, out, reading)
    if targets is None:
        return None
    req.target = targets

    asked = find_horizon(prompt)
    if asked is None:
        out.problems.append(RequestProblem("horizon", "the request does not say how far ahead to forecast",
                                           "say it: 'forecast the next 96 hours of OT' or 'the next 14 steps'"))
        return None
    step_s = _step_seconds(frame[time_col])
    horizon = _horizon_rows(*asked, step_s, out)
    if horizon is None:
        return None
    notes.append(f"horizon: {horizon} steps ({asked[0]} {asked[1] or 'step'}(s)"
                 + (f"; one step is {_describe_seconds(step_s)})" if step_s else ")"))

    metrics = [m for m in find_metrics(prompt) if m in ("mae", "rmse")]
    req.metric = metrics[0] if metrics else "mse"
    notes.append(f"metric: {req.metric}" + (" (named in the request)" if metrics else " (the forecasting default; name mae or rmse to change it)"))

    n = len(frame)
    n_val = max(int(round(VALIDATION_SHARE * n)), 2 * horizon)
    train_end = n - n_val
    lookbacks = sorted({*STANDARD_LOOKBACKS, horizon, 2 * horizon, 4 * horizon})
    lookbacks = [L for L in lookbacks if 8 <= L <= (train_end - horizon) // 2]
    if train_end < 4 * horizon or not lookbacks:
        out.problems.append(RequestProblem("horizon", f"{n} rows of history are too few to learn a {horizon}-step forecast "
                                           f"and validate it (at least {6 * horizon} rows, about 6 horizons)",
                                           "give a longer history or ask for a shorter horizon"))
        return None
    notes.append(f"rows: {train_end} train, the last {n_val} validate; the forecast is the {horizon} steps after the last row; "
                 f"look-backs {lookbacks}")
    return {"file": series_file, "time": time_col, "targets": targets, "inputs": "all", "horizon": horizon,
            "lookback": lookbacks, "borders": {"train": train_end, "validation": n}}

