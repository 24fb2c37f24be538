"""The program's side of forecast mode (copied into every forecasting task's input as
``input/mcgs_forecast.py``; it imports nothing of mcgs, which candidates do not have).

In forecast mode (``MCGS_MODE=forecast``) a program loads the model it saved in search mode
and calls :func:`serve` with a function that forecasts one window::

    import sys; sys.path.insert(0, "input")
    from mcgs_forecast import serve
    serve(lambda window: model_forecast(window), lookback=LOOKBACK)

``window`` is float32 of shape ``(lookback, inputs)``: the look-back rows of the task's input
series, scaled as ``input/history.csv`` is, oldest first. The function returns the next
``horizon`` rows of the target series, shape ``(horizon, targets)``. The engine sends the next
window only after the answer to this one. With ``with_time=True`` the function is called as
``forecast(window, time)``, ``time`` the time of the window's first forecast row in seconds since
1970 (UTC), or -1 when unknown (for calendar features).
"""

import os
import struct

import numpy as np

FDS_ENV = "MCGS_FORECAST_FDS"


def _read(fd, n):
    chunks, got = [], 0
    while got < n:
        chunk = os.read(fd, min(n - got, 1 << 20))
        if not chunk:
            raise EOFError("the engine closed the window stream")
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


def _write(fd, data):
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


TIME_FLAG = 1 << 30


def serve(forecast, lookback, horizon=None, n_targets=None, with_time=False):
    """Answer the engine's windows one at a time (module docstring).

    Args:
        forecast: ``window (lookback, inputs) -> (horizon, targets)``.
        lookback: The look-back the model was fitted with (one the task allows).
        horizon, n_targets: The answer's shape (default: from ``input/task.json``).
        with_time: Also pass each window's time (module docstring).

    Returns:
        The number of windows answered.
    """
    if horizon is None or n_targets is None:
        import json

        task = json.load(open("input/task.json"))["forecast"]
        horizon, n_targets = task["horizon"], len(task["target_columns"])
    rfd, wfd = (int(x) for x in os.environ[FDS_ENV].split(","))
    _write(wfd, struct.pack("<i", int(lookback) | (TIME_FLAG if with_time else 0)))
    n, lb, n_in = struct.unpack("<iii", _read(rfd, 12))
    for _ in range(n):
        when = struct.unpack("<q", _read(rfd, 8))[0] if with_time else None
        window = np.frombuffer(_read(rfd, lb * n_in * 4), dtype="<f4").reshape(lb, n_in)
        out = forecast(window, when) if with_time else forecast(window)
        out = np.asarray(out, dtype="<f4").reshape(horizon, n_targets)
        _write(wfd, out.tobytes())
    return n
