"""Forecast mode: the engine runs a node's fitted model window by window (:mod:`mcgs.forecast`).

A forecasting node's test forecasts never come from its search-mode run: the engine starts the
node's program again in its workspace with ``MCGS_MODE=forecast``, in the run's sandbox, and
feeds it the test windows one at a time (:class:`mcgs.forecast.WindowFeed`), so the program
sees no test value past the look-back of the window it answers. What it writes into
``RUN_DIR/best/``:

* ``test_forecast.npy``: float32, shape ``(windows, horizon, targets)``, scaled as the task's
  history is (the protocol's values); window ``i`` forecasts rows ``[o_i, o_i + horizon)`` of
  the test origins (:meth:`mcgs.forecast.ForecastSpec.test_origins`);
* ``test_score.json`` where the task's history holds the test rows (a backtest or a published
  protocol): the metric, MSE and MAE over every window, step and target;
* ``submission.csv`` for a real forecast (no test border): the time of each future step and
  each target's forecast in the history's own units.
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np

from mcgs.forecast import TEST_FORECAST_FILE, ForecastError, WindowFeed, origin_times, window_targets
from mcgs.node import FrozenNode, Operator

__all__ = ["forecast_windows", "write_test_forecast", "forecast_scores", "finish_forecast", "forecast_labels", "pending_test_forecast"]

#: Test windows that one candidate's time limit (``node_limit_s``) covers in forecast mode; more
#: windows lengthen the limit in proportion. Weather's 10 348 test windows at horizon 192 took a
#: direct LightGBM forecaster 150 s for 1 827 of them on a machine busy with other work (12 a
#: second), so a fixed limit left a finished run without its test forecast.
WINDOWS_PER_LIMIT = 1500


def forecast_labels(run_dir: Path, task):
    """The run's :class:`mcgs.forecast.ForecastLabels`, from the engine's own copy of the series
    (``RUN_DIR/private/series.npy``, written with the run's input)."""
    from mcgs.forecast import ForecastLabels

    return ForecastLabels(task, np.load(Path(run_dir) / "private" / "series.npy"))


def finish_forecast(search, node: FrozenNode) -> None:
    """The handed-in node's test forecasts at the end of a run (:func:`write_test_forecast`),
    said on the console; a failure is said, not raised: the run's nodes stay, and a resume tries
    again."""
    try:
        out = write_test_forecast(search, node)
    except ForecastError as exc:
        search.say(f"warning: no test forecast: {exc}")
        return
    scores = out["scores"]
    search.say(f"test forecast of node {node.seq} (look-back {out['lookback']}): {out['windows']} window(s) -> best/test_forecast.npy"
               + (f" (test mse {scores['mse']:.4f}, mae {scores['mae']:.4f})" if scores else " and best/submission.csv"))


def pending_test_forecast(search) -> FrozenNode | None:
    """The node whose test forecast a forecasting run still lacks (``best/test_forecast.npy``
    absent: forecast mode failed at the end of the run, or the run stopped before it), or None
    (not a forecasting task, the forecast is there, or no valid node). ``mcgs resume`` of a run
    whose budget is spent forecasts with it instead of refusing."""
    if search.task.forecast is None or (search.run_dir / "best" / TEST_FORECAST_FILE).is_file():
        return None
    return search.final_node


def forecast_windows(search, node: FrozenNode, origins, timeout_s: float | None = None) -> np.ndarray:
    """Run ``node``'s program in forecast mode on the windows at ``origins``.

    Args:
        search: The search (its sandbox limits, its copy of the series).
        node: A valid node of a forecasting task (its workspace holds its model).
        origins: Window origins (rows of the series).
        timeout_s: The program's limit (default: the run's limit of one candidate).

    Returns:
        ``(forecasts, lookback)``: float32 of shape ``(len(origins), horizon, targets)``, and the
        look-back (rows) the program asked for.

    Raises:
        ForecastError: the program failed, timed out or broke the window protocol; the
            message says which and how it ended.
    """
    from mcgs.sandbox import Outcome, run_program

    f = search.task.forecast
    values = np.load(search.run_dir / "private" / "series.npy")
    feed = WindowFeed(values, origins, f.horizon, len(f.targets), f.lookbacks, times=origin_times(search.task.data_dir, f, origins))
    limits = search.sandbox_limits(timeout_s or search.settings.node_limit_s)
    result = run_program(search.node_dir(node), "solution.py", limits, extra_env={"MCGS_MODE": "forecast", "MCGS_SEED": "0"},
                         feed=feed, cancel=search.stop_event)
    try:
        forecasts = feed.result()
    except ForecastError as exc:
        tail = f"; its error: {result.traceback_tail or result.error}" if result.outcome is not Outcome.OK else ""
        raise ForecastError(f"node {node.seq} in forecast mode ({result.outcome.value}): {exc}{tail}") from None
    if result.outcome is not Outcome.OK:
        raise ForecastError(f"node {node.seq} in forecast mode answered every window but ended {result.outcome.value}: {result.error}")
    return forecasts, feed.lookback


def forecast_scores(y: np.ndarray, pred: np.ndarray) -> dict[str, float]:
    """MSE and MAE over every window, step and target (the protocol's averages)."""
    err = pred.astype(np.float64) - y
    return {"mse": float(np.mean(err ** 2)), "mae": float(np.mean(np.abs(err)))}


def write_test_forecast(search, node: FrozenNode) -> dict:
    """Forecast the test windows with ``node`` (:func:`forecast_windows`) and write them into
    ``RUN_DIR/best/`` (module docstring).

    The program's limit is the run's limit of one candidate, lengthened in proportion to the
    windows beyond :data:`WINDOWS_PER_LIMIT`. An ensemble node's test windows are its members'
    forecast-mode answers, each member's program run in its own workspace, blended with the
    node's weights; a member that fails is said and left out, the others' weights renormalised.

    Returns:
        What was written: ``{"node": seq, "windows": n, "lookback": L, "scores": {"mse", "mae"} | None}``
        (an ensemble's ``lookback``: member seq -> its look-back).

    Raises:
        ForecastError: as :func:`forecast_windows` (for an ensemble: every member failed).
    """
    from mcgs.best_folder import atomic_write

    f = search.task.forecast
    origins = f.test_origins()
    limit = search.settings.node_limit_s * max(1.0, len(origins) / WINDOWS_PER_LIMIT)
    if node.operator is Operator.ENSEMBLE:  # each member's program in its own workspace, blended with the node's weights
        by_id = {n.id: n for n in search.nodes()}
        weights = [(by_id[int(i)], float(w)) for i, w in node.config["weights"].items()]
        pred, lookback, used, failed = np.zeros((len(origins), f.horizon, len(f.targets)), dtype=np.float64), {}, 0.0, []
        for member, w in weights:
            try:
                answer, lookback[member.seq] = forecast_windows(search, member, origins, timeout_s=limit)
            except ForecastError as exc:
                failed.append(str(exc))
                search.say(f"warning: ensemble node {node.seq} forecasts the test windows without member {member.seq} (weight {w:g}): {exc}")
                continue
            pred, used = pred + w * answer, used + w
        if not used:
            raise ForecastError(f"every member of ensemble node {node.seq} failed in forecast mode: {'; '.join(failed)}")
        pred = (pred / used).astype(np.float32)
    else:
        pred, lookback = forecast_windows(search, node, origins, timeout_s=limit)
    best = search.run_dir / "best"
    best.mkdir(exist_ok=True)
    raw = io.BytesIO()
    np.save(raw, pred)
    atomic_write(best / TEST_FORECAST_FILE, raw.getvalue())
    out = {"node": node.seq, "windows": len(origins), "lookback": lookback, "scores": None}
    if f.test_end is not None:
        values = np.load(search.run_dir / "private" / "series.npy")
        scores = forecast_scores(window_targets(values, origins, f.horizon, f.target_index), pred)
        out["scores"] = scores
        atomic_write(best / "test_score.json", json.dumps(out | {"metric": search.task.metric}, indent=2).encode())
    else:
        _write_future(search, best, pred[0])
    return out


def _write_future(search, best: Path, pred: np.ndarray) -> None:
    """``best/submission.csv``: the future steps' times and forecasts in the history's units."""
    import pandas as pd

    from mcgs.best_folder import atomic_write

    f = search.task.forecast
    times = pd.to_datetime(pd.read_csv(search.task.data_dir / f.file, usecols=[f.time])[f.time])
    step = pd.tseries.frequencies.to_offset(f.step) if f.step else (times.iloc[-1] - times.iloc[-2])
    future = pd.date_range(times.iloc[-1] + step, periods=f.horizon, freq=step)
    mean, std = np.asarray(f.mean)[f.target_index], np.asarray(f.std)[f.target_index]
    frame = pd.DataFrame(pred * std + mean, columns=f.targets)
    frame.insert(0, f.time, future)
    atomic_write(best / "submission.csv", frame.to_csv(index=False).encode())
