"""Forecasting tasks: many steps ahead from a history of one or more series.

A forecasting task is a table of time-ordered rows (a time column and one column per series)
cut into three parts by row borders, as the long-horizon benchmarks do (Informer, Autoformer,
the Time-Series-Library): the **training** rows ``[0, train)``, the **validation** rows
``[train, validation)`` and the **test** rows ``[validation, test)``. A *window* with origin
``t`` asks for the ``horizon`` rows ``[t, t + horizon)`` of the target series from the
*look-back* rows ``[t - L, t)`` of the input series; its look-back may reach into the part
before its own (a validation window's look-back starts in the training rows)::

    series.csv   date, HUFL, ..., OT           the history, in time order
    task.yaml    metric: mse
                 forecast:
                   time: date
                   horizon: 96
                   lookback: [96, 192, 336, 512]     the look-backs a candidate may choose
                   borders: {train: 8640, validation: 11520, test: 14400}
                   targets: all                      or a list (OT); inputs: all | targets | a list

Without a ``test`` border the task is a real forecast: the validation rows end the history and
the one test window is the future after its last row.

How a candidate meets it (solution contract 1.5, ``task.json``'s ``forecast``):

* **Search mode** reads ``input/history.csv``: the training and validation rows, scaled by the
  engine (``scaling: standard``: each input series standardised with the mean and standard
  deviation of its training rows, the protocol's ``StandardScaler``), fits on the training rows
  (validation rows may serve early stopping, never fitting), saves what it needs under
  ``working/model/`` and writes ``working/val_forecast.npy``: float32, shape
  ``(windows, horizon, targets)``, the forecasts of the validation windows
  (:meth:`ForecastSpec.validation_origins`, every ``validation_stride``-th origin). The engine
  scores them with the task's metric on the scaled values.
* **Forecast mode** (``MCGS_MODE=forecast``), run by the engine (:class:`WindowFeed`): the
  program loads its model and answers windows one at a time over two pipes: the engine sends a
  window's look-back and waits for its forecast before it sends the next, so no program ever
  sees a test value past the look-back of the window it is forecasting (``input/mcgs_forecast.py``
  speaks the protocol for it). Test forecasts come only from this mode.
"""

from __future__ import annotations

import math
import os
import struct
import threading
from pathlib import Path
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "ForecastError",
    "ForecastSetting",
    "ForecastSpec",
    "ForecastLabels",
    "VAL_FORECAST_PATH",
    "TEST_FORECAST_FILE",
    "MODEL_DIR",
    "HISTORY_FILE",
    "FDS_ENV",
    "check_forecast",
    "read_series",
    "window_targets",
    "origin_times",
    "describe_forecast",
    "WindowFeed",
]

HISTORY_FILE = "history.csv"
VAL_FORECAST_PATH = "working/val_forecast.npy"
TEST_FORECAST_FILE = "test_forecast.npy"
MODEL_DIR = "working/model"
FDS_ENV = "MCGS_FORECAST_FDS"
#: set in the look-back a program asks for when it also wants each window's time
TIME_FLAG = 1 << 30
#: most validation windows a node is scored on; more are thinned to every k-th origin
MAX_VALIDATION_WINDOWS = 1000
#: contiguous blocks of validation windows an ensemble's weights are cross-fitted on
ENSEMBLE_FOLDS = 5


class ForecastError(ValueError):
    """A forecasting task's history or settings cannot be used, or a program broke the window
    protocol."""


class ForecastBorders(BaseModel):
    """Where each part of the history ends: a row count (>= 1) or a share of the rows (< 1)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    train: float = Field(0.7, gt=0)
    validation: float = Field(1.0, gt=0)
    test: float | None = Field(None, gt=0)


class ForecastSetting(BaseModel):
    """task.yaml's ``forecast`` (module docstring).

    Attributes:
        file: The history table in the task folder (CSV, or a zip holding one CSV).
        time: Its time column.
        targets: The series to forecast: ``all`` (every numeric column) or a list.
        inputs: The series a window's look-back holds: ``all``, ``targets`` or a list (which
            must contain the targets).
        horizon: Rows forecast per window.
        lookback: The look-backs (rows) a candidate may choose from.
        borders: :class:`ForecastBorders`.
        scaling: ``standard`` (per series, on the training rows) or ``none``.
        irregular_steps: ``error`` (default: a gap or a repeated time stops the task) or
            ``allow`` (the rows are taken as consecutive steps, as published protocols do for
            data sets with a few irregular steps).
        validation_stride: Every k-th validation origin is scored; default: enough that at most
            :data:`MAX_VALIDATION_WINDOWS` remain.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)
    file: str = "series.csv"
    time: str
    targets: list[str] | Literal["all"] = "all"
    inputs: list[str] | Literal["all", "targets"] = "all"
    horizon: int = Field(gt=0)
    lookback: list[int] | int = [96]
    borders: ForecastBorders = ForecastBorders()
    scaling: Literal["standard", "none"] = "standard"
    irregular_steps: Literal["error", "allow"] = "error"
    validation_stride: int | None = Field(None, gt=0)


class ForecastSpec(BaseModel):
    """A checked forecasting task: :class:`ForecastSetting` with its columns, borders and scaling
    resolved.

    Attributes:
        file, time: The history file and its time column.
        inputs: Series a look-back holds, in order; ``targets`` is a subset of them.
        horizon, lookbacks: Rows forecast per window; the look-backs allowed (ascending).
        train_end, validation_end, test_end: The borders (rows); ``test_end`` None for a real
            forecast (the one test window follows the last row).
        n_rows: Rows of the history table.
        mean, std: Per input series, the scaling (identity for ``scaling: none``).
        validation_stride: Every k-th validation origin is scored.
        step: The time step (text, e.g. ``1h``), or None when irregular.
    """

    model_config = ConfigDict(frozen=True)
    file: str
    time: str
    inputs: list[str]
    targets: list[str]
    horizon: int
    lookbacks: list[int]
    train_end: int
    validation_end: int
    test_end: int | None
    n_rows: int
    scaling: str
    mean: list[float]
    std: list[float]
    validation_stride: int
    step: str | None = None

    @property
    def target_index(self) -> list[int]:
        """Positions of the targets among the inputs."""
        return [self.inputs.index(t) for t in self.targets]

    def validation_origins(self) -> range:
        """Origins of the scored validation windows: every ``validation_stride``-th row ``t``
        with ``[t, t + horizon)`` inside the validation rows."""
        return range(self.train_end, self.validation_end - self.horizon + 1, self.validation_stride)

    def test_origins(self) -> range:
        """Origins of the test windows: every row (stride 1) with its horizon inside the test
        rows, as the Time-Series-Library protocol scores; for a real forecast the one origin
        after the last row."""
        if self.test_end is None:
            return range(self.n_rows, self.n_rows + 1)
        return range(self.validation_end, self.test_end - self.horizon + 1)

    @property
    def visible_rows(self) -> int:
        """Rows a search-mode program reads (training and validation)."""
        return self.validation_end


def _border(value: float, n: int, name: str, where: str) -> int:
    rows = int(value) if value >= 1 else int(math.floor(value * n))
    if value >= 1 and value != int(value):
        raise ForecastError(f"{where}: forecast.borders.{name} = {value} is neither a row count nor a share below 1")
    return rows


def _columns(frame, setting: ForecastSetting, where: str) -> tuple[list[str], list[str]]:
    import pandas as pd

    numeric = [c for c in frame.columns if c != setting.time and pd.api.types.is_numeric_dtype(frame[c])]
    other = [c for c in frame.columns if c != setting.time and c not in numeric]
    if setting.targets == "all":
        targets = numeric
    else:
        targets = list(setting.targets)
    for c in targets:
        if c not in frame.columns:
            raise ForecastError(f"{where}: forecast.targets names {c!r}, which is not a column of {setting.file} "
                                f"(columns: {', '.join(map(str, frame.columns[:20]))})")
        if c not in numeric:
            raise ForecastError(f"{where}: the target series {c!r} of {setting.file} is not numeric; forecasts need numbers")
    if not targets:
        raise ForecastError(f"{where}: {setting.file} has no numeric column to forecast besides the time column {setting.time!r}"
                            + (f" (not numeric: {', '.join(other[:5])})" if other else ""))
    if setting.inputs == "all":
        inputs = numeric
    elif setting.inputs == "targets":
        inputs = list(targets)
    else:
        inputs = list(setting.inputs)
        bad = [c for c in inputs if c not in numeric]
        if bad:
            raise ForecastError(f"{where}: forecast.inputs names {bad[0]!r}, which is not a numeric column of {setting.file}")
        missing = [t for t in targets if t not in inputs]
        if missing:
            raise ForecastError(f"{where}: forecast.inputs must hold the targets; add {', '.join(missing)}")
    return inputs, targets


def _time_step(times, setting: ForecastSetting, where: str) -> str | None:
    """The history's regular step, or an error naming the first gap or repeat (``allow``: None
    when irregular)."""
    import pandas as pd

    if times.isna().any():
        row = int(np.flatnonzero(times.isna().to_numpy())[0])
        raise ForecastError(f"{where}: row {row} of {setting.file} has no time in {setting.time!r}; fill or drop it")
    diffs = times.diff().iloc[1:]
    if (diffs <= pd.Timedelta(0)).any() and setting.irregular_steps == "error":
        row = int(np.flatnonzero((diffs <= pd.Timedelta(0)).to_numpy())[0]) + 1
        raise ForecastError(f"{where}: {setting.file} is not in time order or repeats a time at row {row} ({times.iloc[row]}); "
                            f"sort it and drop repeats, or set forecast.irregular_steps: allow to take the rows as steps")
    if diffs.empty:
        return None
    step = diffs.mode().iloc[0]
    off = diffs != step
    if off.any():
        if setting.irregular_steps == "error":
            row = int(np.flatnonzero(off.to_numpy())[0]) + 1
            raise ForecastError(
                f"{where}: {setting.file} has a gap at row {row}: {times.iloc[row - 1]} -> {times.iloc[row]} where every other "
                f"step is {step}; fill the missing rows (e.g. interpolate), or set forecast.irregular_steps: allow to take the rows as "
                f"consecutive steps ({int(off.sum())} irregular step(s))")
        return None
    return str(pd.tseries.frequencies.to_offset(step).freqstr) if step else None


def check_forecast(data_dir: Path, setting: ForecastSetting, where: str) -> tuple[ForecastSpec, list[str]]:
    """Read and check a forecasting task's history.

    Returns:
        ``(spec, notes)``: the resolved :class:`ForecastSpec` and what a user should know.

    Raises:
        ForecastError: the file, the time column, a series, a border, the horizon or a
            look-back cannot be used; the message names it and says how to fix it.
    """
    import pandas as pd

    path = Path(data_dir) / setting.file
    if not path.is_file():
        raise ForecastError(f"{where}: forecast.file {setting.file!r} is not a file in {data_dir}")
    try:
        frame = pd.read_csv(path)
    except (ValueError, OSError) as exc:
        raise ForecastError(f"{where}: cannot read {path}: {exc}") from None
    if setting.time not in frame.columns:
        raise ForecastError(f"{where}: forecast.time {setting.time!r} is not a column of {setting.file} "
                            f"(columns: {', '.join(map(str, frame.columns[:20]))})")
    times = pd.to_datetime(frame[setting.time], errors="coerce")
    inputs, targets = _columns(frame, setting, where)
    values = frame[inputs].to_numpy(dtype=np.float64)
    if not np.isfinite(values).all():
        col, row = next((c, int(np.flatnonzero(~np.isfinite(frame[c].to_numpy(dtype=float)))[0])) for c in inputs
                        if not np.isfinite(frame[c].to_numpy(dtype=float)).all())
        count = int((~np.isfinite(values)).sum())
        raise ForecastError(f"{where}: the series {col!r} of {setting.file} has a missing value at row {row} ({count} in all); "
                            f"fill the gaps (e.g. interpolate) before forecasting")
    step = _time_step(times, setting, where)
    n = len(frame)
    b = setting.borders
    train_end, val_end = _border(b.train, n, "train", where), _border(b.validation, n, "validation", where)
    test_end = None if b.test is None else _border(b.test, n, "test", where)
    last = test_end if test_end is not None else val_end
    if not 0 < train_end < val_end <= last <= n:
        raise ForecastError(f"{where}: forecast.borders must satisfy 0 < train ({train_end}) < validation ({val_end})"
                            + (f" < test ({test_end})" if test_end is not None else "") + f" <= the {n} rows of {setting.file}")
    h = setting.horizon
    if test_end is not None and h > test_end - val_end:
        raise ForecastError(f"{where}: the horizon ({h}) is longer than the test part ({test_end - val_end} rows, "
                            f"{val_end}..{test_end}); shorten forecast.horizon or move the borders")
    if h > val_end - train_end:
        raise ForecastError(f"{where}: the horizon ({h}) is longer than the validation part ({val_end - train_end} rows); "
                            f"shorten forecast.horizon or move forecast.borders.train earlier")
    lookbacks = sorted({int(x) for x in ([setting.lookback] if isinstance(setting.lookback, int) else setting.lookback)})
    if not lookbacks or lookbacks[0] < 1:
        raise ForecastError(f"{where}: forecast.lookback must list look-backs of at least one row")
    if lookbacks[-1] >= train_end:
        raise ForecastError(f"{where}: the look-back {lookbacks[-1]} needs more rows than the {train_end} training rows; "
                            f"drop it from forecast.lookback")
    if setting.scaling == "standard":
        mean = values[:train_end].mean(axis=0)
        std = values[:train_end].std(axis=0)
        flat = [c for c, s in zip(inputs, std) if s == 0]
        std = np.where(std == 0, 1.0, std)
    else:
        mean, std, flat = np.zeros(len(inputs)), np.ones(len(inputs)), []
    n_val = max(0, val_end - h + 1 - train_end)
    stride = setting.validation_stride or max(1, math.ceil(n_val / MAX_VALIDATION_WINDOWS))
    notes = [f"forecasting {len(targets)} series {h} steps ahead from {len(inputs)}; rows: {train_end} training, "
             f"{val_end - train_end} validation" + (f", {test_end - val_end} test" if test_end is not None else
                                                     " (the forecast follows the last row)")]
    if flat:
        notes.append(f"constant over the training rows (scaled by 1): {', '.join(flat)}")
    spec = ForecastSpec(file=setting.file, time=setting.time, inputs=inputs, targets=targets, horizon=h, lookbacks=lookbacks,
                        train_end=train_end, validation_end=val_end, test_end=test_end, n_rows=n, scaling=setting.scaling,
                        mean=[float(x) for x in mean], std=[float(x) for x in std], validation_stride=stride, step=step)
    return spec, notes


def read_series(data_dir: Path, spec: ForecastSpec, rows: int | None = None) -> tuple[Any, np.ndarray]:
    """``(times, values)``: the time column and the scaled input series of the first ``rows``
    rows (all by default); ``values`` float64, shape ``(rows, len(spec.inputs))``."""
    import pandas as pd

    frame = pd.read_csv(Path(data_dir) / spec.file, nrows=rows)
    values = (frame[spec.inputs].to_numpy(dtype=np.float64) - np.asarray(spec.mean)) / np.asarray(spec.std)
    return frame[spec.time], values


def origin_times(data_dir: Path, spec: ForecastSpec, origins) -> np.ndarray:
    """The time of each window's first forecast row, int64 seconds since 1970 (UTC): the time
    column at the origin's row, or, for the origin after the last row (a real forecast), the last
    time plus the history's step (its median step when irregular)."""
    import pandas as pd

    origins = np.asarray(list(origins), dtype=np.int64)
    times = pd.to_datetime(pd.read_csv(Path(data_dir) / spec.file, usecols=[spec.time])[spec.time])
    if times.dt.tz is not None:
        times = times.dt.tz_convert(None)
    seconds = times.astype("datetime64[s]").astype(np.int64).to_numpy()
    step = int(np.median(np.diff(seconds))) if len(seconds) > 1 else 0
    extended = np.append(seconds, seconds[-1] + step)
    return extended[np.minimum(origins, len(extended) - 1)]


def window_targets(values: np.ndarray, origins: range, horizon: int, target_index: list[int]) -> np.ndarray:
    """The true values of windows: shape ``(len(origins), horizon, len(target_index))``."""
    out = np.empty((len(origins), horizon, len(target_index)), dtype=np.float64)
    for i, t in enumerate(origins):
        out[i] = values[t: t + horizon][:, target_index]
    return out


def describe_forecast(spec: ForecastSpec, values: np.ndarray) -> dict[str, Any]:
    """The data profile's ``forecast`` section: sizes, borders, step, and per series of the
    training rows the lag-1 and seasonal autocorrelations (the lag with the largest one among
    common periods) that tell a coder how predictable the series are."""
    train = values[: spec.train_end]
    season = {}
    for period in (24, 7, 12, 48, 96, 144, 168, 52):
        if period * 3 < len(train):
            season[period] = float(np.nanmean([_autocorr(train[:, j], period) for j in range(train.shape[1])]))
    best = max(season, key=season.get) if season else None
    return {
        "series": len(spec.inputs), "targets": spec.targets, "inputs": spec.inputs, "horizon": spec.horizon,
        "lookbacks": spec.lookbacks, "rows": {"train": spec.train_end, "validation": spec.validation_end - spec.train_end,
                                              "test": None if spec.test_end is None else spec.test_end - spec.validation_end},
        "step": spec.step, "validation_windows": len(spec.validation_origins()), "test_windows": len(spec.test_origins()),
        "lag1_autocorrelation": round(float(np.nanmean([_autocorr(train[:, j], 1) for j in range(train.shape[1])])), 3),
        "seasonal_period": best, "seasonal_autocorrelation": None if best is None else round(season[best], 3),
    }


def _autocorr(x: np.ndarray, lag: int) -> float:
    a, b = x[:-lag], x[lag:]
    if a.std() == 0 or b.std() == 0:
        return float("nan")
    return float(np.corrcoef(a, b)[0, 1])


class ForecastLabels:
    """What the engine holds to score a forecasting task: the true values of the validation
    windows, shape ``(windows, horizon, targets)`` (:meth:`ForecastSpec.validation_origins`).

    Attributes:
        spec: The task (:class:`mcgs.task.TaskSpec` with ``forecast`` set).
        y: The validation windows' true (scaled) values.
        folds, validated_rows: Per window its block (0-4, in time order) and every window's
            index: what ensemble selection reads of a table task's labels.
    """

    def __init__(self, spec, values: np.ndarray) -> None:
        f = spec.forecast
        self.spec = spec
        self.y = window_targets(values, f.validation_origins(), f.horizon, f.target_index)
        n = len(self.y)
        #: five contiguous blocks of the validation windows: the folds an ensemble's weights are
        #: cross-fitted on (:func:`mcgs.ensemble.nested_ensemble_score`)
        self.folds = np.arange(n) * ENSEMBLE_FOLDS // max(n, 1)
        self.validated_rows = np.arange(n)

    @classmethod
    def load(cls, spec, data_dir: Path) -> "ForecastLabels":
        """From the task folder's history (the engine's copy; never a candidate's)."""
        return cls(spec, read_series(data_dir, spec.forecast, spec.forecast.visible_rows)[1])


# ---------------------------------------------------------------------------- window protocol
# Messages (little-endian): the program first sends int32 L (its look-back); the engine answers
# int32 (windows, L, inputs); then per window the engine sends float32 (L, inputs) and the
# program sends float32 (horizon, targets). The engine closes its end after the last window.


class WindowFeed:
    """The engine's side of forecast mode: one window at a time over two pipes.

    Give :attr:`child_fds` to the program (``pass_fds``) with :meth:`env`, call :meth:`started`
    once it runs (closes the engine's copies of the child's ends), then :meth:`result` after it
    ended. A program that breaks the protocol (an unknown look-back, a short or non-finite
    forecast) is cut off; :meth:`result` says why.

    The exchange: the program writes int32 ``L`` (the look-back it wants; with
    :data:`TIME_FLAG` set, it also wants each window's time), the engine int32 ``(windows, L,
    inputs)``; then per window the engine writes, when asked, int64 the time of the window's first
    forecast row (seconds since 1970, UTC; -1 when unknown), and float32
    ``(L, inputs)`` the look-back, and the program answers float32 ``(horizon, targets)``.

    Args:
        values: The scaled series, shape ``(rows, inputs)``, at least up to the last origin.
        origins: The windows' origins (each needs ``origin >= L`` rows before it).
        horizon, n_targets: The answer's shape per window.
        lookbacks: The look-backs a program may ask for.
        times: Per origin, the time of its first forecast row (:func:`origin_times`); None sends
            -1 to a program that asks.
    """

    def __init__(self, values: np.ndarray, origins, horizon: int, n_targets: int, lookbacks: list[int],
                 times: np.ndarray | None = None) -> None:
        self.values = np.ascontiguousarray(values, dtype=np.float32)
        self.origins, self.horizon, self.n_targets, self.lookbacks = list(origins), horizon, n_targets, lookbacks
        self.times = np.full(len(self.origins), -1, dtype=np.int64) if times is None else np.asarray(times, dtype=np.int64)
        self._to_child_r, self._to_child_w = os.pipe()
        self._from_child_r, self._from_child_w = os.pipe()
        self.child_fds = (self._to_child_r, self._from_child_w)
        self.forecasts: np.ndarray | None = None
        self.lookback: int | None = None
        self.error: str | None = None
        self.answered = 0
        self._thread = threading.Thread(target=self._serve, daemon=True, name="mcgs-window-feed")

    def env(self) -> dict[str, str]:
        """The program's environment entry naming its two descriptors (read, write)."""
        return {FDS_ENV: f"{self._to_child_r},{self._from_child_w}"}

    def started(self) -> None:
        """The program runs: close the child's ends here and start feeding."""
        for fd in self.child_fds:
            os.close(fd)
        self._thread.start()

    def abandon(self) -> None:
        """The program never started: close every end."""
        for fd in (*self.child_fds, self._to_child_w, self._from_child_r):
            try:
                os.close(fd)
            except OSError:
                pass

    def _read(self, n: int) -> bytes | None:
        chunks, got = [], 0
        while got < n:
            chunk = os.read(self._from_child_r, min(n - got, 1 << 20))
            if not chunk:
                return None
            chunks.append(chunk)
            got += len(chunk)
        return b"".join(chunks)

    def _serve(self) -> None:
        try:
            self._exchange()
        except (BrokenPipeError, OSError) as exc:
            self.error = self.error or f"the program stopped answering windows after {self.answered} ({exc.strerror or exc})"
        finally:
            for fd in (self._to_child_w, self._from_child_r):
                try:
                    os.close(fd)
                except OSError:
                    pass

    def _exchange(self) -> None:
        head = self._read(4)
        if head is None:
            self.error = "the program never asked for windows (forecast mode: call serve() of input/mcgs_forecast.py)"
            return
        asked = struct.unpack("<i", head)[0]
        with_time, lookback = bool(asked & TIME_FLAG), asked & ~TIME_FLAG
        if lookback not in self.lookbacks:
            self.error = f"the program asked for a look-back of {lookback} rows; the task allows {self.lookbacks}"
            return
        if self.origins and self.origins[0] < lookback:
            self.error = f"the first window (row {self.origins[0]}) has fewer than {lookback} rows before it"
            return
        self.lookback = lookback
        n_in = self.values.shape[1]
        os.write(self._to_child_w, struct.pack("<iii", len(self.origins), lookback, n_in))
        out = np.empty((len(self.origins), self.horizon, self.n_targets), dtype=np.float32)
        size = self.horizon * self.n_targets * 4
        for i, t in enumerate(self.origins):
            if with_time:
                _write_all(self._to_child_w, struct.pack("<q", int(self.times[i])))
            _write_all(self._to_child_w, self.values[t - lookback: t].tobytes())
            answer = self._read(size)
            if answer is None:
                self.error = f"the program stopped answering after {i} of {len(self.origins)} windows"
                return
            forecast = np.frombuffer(answer, dtype="<f4").reshape(self.horizon, self.n_targets)
            if not np.isfinite(forecast).all():
                self.error = f"the forecast of window {i} (origin row {t}) is not finite"
                return
            out[i] = forecast
            self.answered = i + 1
        self.forecasts = out

    def result(self, timeout_s: float = 10.0) -> np.ndarray:
        """The forecasts, shape ``(windows, horizon, targets)``, float32.

        Raises:
            ForecastError: the program broke the protocol or ended before the last window.
        """
        self._thread.join(timeout_s)
        if self._thread.is_alive():
            raise ForecastError(f"the window exchange did not end ({self.answered} of {len(self.origins)} windows answered)")
        if self.forecasts is None:
            raise ForecastError(self.error or f"the program answered {self.answered} of {len(self.origins)} windows")
        return self.forecasts


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]
