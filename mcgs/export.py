"""``mcgs export``: a deployable folder for a node, with its own fitted fold models, and the
request's constraints checked on it (AutoML-Agent's final verification: Trirat et al., ICML 2025,
§3.4, "deployment-stage verification" of the chosen model against the user's constraints).

The folder is a node workspace that runs without mcgs::

    OUT/
      solution.py            the node's program (solution contract 1.1: search / predict / refit modes)
      working/model.joblib   the node's fitted estimators, as saved during the run
      input/                 task.json, folds.csv and the training table (features are computed
                             with the training rows, as in the run)
      predict.py             `python predict.py IN.csv OUT.csv [--raw]`, or `predict(DataFrame)`
      train.py               refits on every training row (replaces working/model.joblib)
      requirements.txt       the packages the program imports, pinned to the run's versions
      MODEL_CARD.md          task, metric, scores, data fingerprint, constraints measured, lineage

An ensemble node is exported with its members: ``members/<node>/`` holds each member's own
export (program and fitted models) and its OOF predictions, and ``predict.py`` runs every member
in predict mode and then the ensemble's program on their predictions, as the run blended them.

A forecasting node is exported for forecasting from a history (:mod:`mcgs.forecast`)::

    OUT/
      forecast.py            `python forecast.py HISTORY.csv OUT.csv`: the next `horizon` steps after
                             HISTORY's last row, or `forecast(DataFrame)`
      forecast.json          time column, series, horizon, scaling, the step, members and weights
      members/<node>/        each member's program, working/model/ and input/ (an ensemble has several)
      example_history.csv    the run's last rows in the history's units, to try forecast.py on
      requirements.txt, MODEL_CARD.md

``forecast.py`` scales the history as the run did, runs each member's program in forecast mode
and answers its one request for a look-back over the window protocol (two pipes, as the engine
does), blends the members with the run's weights and writes the forecast in the history's units.
"""

from __future__ import annotations

import ast
import dataclasses
import json
import os
import shutil
from pathlib import Path
from typing import Any

from mcgs.direction import best_first

__all__ = ["ExportError", "ExportResult", "export_node", "measure_constraints"]

MODEL_FILE = "working/model.joblib"

# import name -> distribution name, for requirements.txt
_DISTRIBUTIONS = {
    "numpy": "numpy", "pandas": "pandas", "sklearn": "scikit-learn", "scipy": "scipy", "joblib": "joblib",
    "lightgbm": "lightgbm", "catboost": "catboost", "xgboost": "xgboost", "torch": "torch", "PIL": "pillow",
}


class ExportError(RuntimeError):
    """A node cannot be exported (no saved model, not valid, ...); the message says why and what to do."""


@dataclasses.dataclass(frozen=True)
class ExportResult:
    """What :func:`export_node` wrote and measured.

    Attributes:
        path: The export folder.
        node_seq: The exported node.
        measurements: ``ms_per_row`` (wall time of ``predict.py`` on the task's test table,
            milliseconds per row, process start included; for a forecasting node, of one
            ``forecast.py`` run on ``example_history.csv``), ``model_mb`` (size of the saved
            estimators, MiB), ``interpretable`` (whether the model family is one a person can
            inspect), and ``passed`` / ``failed`` constraint names.
        rejected: Nodes tried before this one whose measurements broke a constraint:
            ``[{"node": seq, "score": ..., **measurements}]``.
    """

    path: Path
    node_seq: int
    measurements: dict[str, Any]
    rejected: list[dict[str, Any]]


# predict() and main() of both predict.py variants (no format fields: appended after formatting)
_PREDICT_TAIL = '''
def _keep_layout(output_path, raw):
    """Keep the prediction-column layout (raw) or the submission format at OUTPUT_PATH."""
    if raw:
        os.replace(str(output_path) + ".raw.csv", output_path)
    else:
        os.remove(str(output_path) + ".raw.csv")
    return output_path


def _media_env(input_path, images):
    """MCGS_PREDICT_MEDIA for an image task: IMAGES (a folder or zip archive), by default the
    folder holding the table to predict; nothing for a table task."""
    if MEDIA_COLUMN is None:
        return {}
    where = Path(images) if images else Path(input_path).resolve().parent
    if not where.exists():
        raise RuntimeError(f"--images {where}: no such folder or zip archive (it holds the files the column {MEDIA_COLUMN!r} names)")
    return {"MCGS_PREDICT_MEDIA": str(where.resolve())}


def _graph_env(edges):
    """MCGS_PREDICT_EDGES for a graph task: the CSV of edges (the task's two edge columns) that
    link nodes new to the graph into it; nothing without one."""
    if not edges:
        return {}
    if not GRAPH:
        raise RuntimeError("--edges: this task is not a graph task")
    if not Path(edges).is_file():
        raise RuntimeError(f"--edges {edges}: no such file (a CSV with the columns of the task's edge list)")
    return {"MCGS_PREDICT_EDGES": str(Path(edges).resolve())}


def predict(df, raw=False, images=None, edges=None):
    """Predictions for a pandas DataFrame with the test table's columns (a DataFrame); for an
    image task, IMAGES is the folder or zip archive of the files its image column names
    (default: the working directory); for a graph task, EDGES a CSV of edges linking the rows'
    nodes that are new to the graph into it."""
    import pandas as pd

    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "input.csv"
        df.to_csv(src, index=False)
        return pd.read_csv(predict_file(src, Path(tmp) / "output.csv", raw=raw, images=images or (os.getcwd() if MEDIA_COLUMN else None),
                                        edges=edges))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("input")
    ap.add_argument("output")
    ap.add_argument("--raw", action="store_true", help="probabilities / values in the prediction-column layout")
    if MEDIA_COLUMN is not None:
        ap.add_argument("--images", help=f"folder or zip archive holding the files IN's column {MEDIA_COLUMN!r} names (default: IN's folder)")
    if GRAPH:
        ap.add_argument("--edges", help="CSV of edges (the task's edge columns) linking IN's nodes that are new to the graph into it")
    args = ap.parse_args()
    try:
        print(predict_file(args.input, args.output, raw=args.raw, images=getattr(args, "images", None), edges=getattr(args, "edges", None)))
    except (RuntimeError, OSError) as exc:
        sys.exit(str(exc))


if __name__ == "__main__":
    main()
'''

PREDICT_PY = '''#!/usr/bin/env python
"""Predictions of mcgs node {seq} ({task}), with the node's own fitted models.

    python predict.py IN.csv OUT.csv          # OUT in the submission format
    python predict.py IN.csv OUT.csv --raw    # OUT in the prediction-column layout (probabilities)
{media_doc}
or, from Python: ``from predict import predict; predict(dataframe)``. IN has the columns of the
task's test table. Needs only the packages in requirements.txt (not mcgs).
"""
import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
MEDIA_COLUMN = {media!r}  # an image task's column of file names, else None
GRAPH = {graph!r}  # a graph task: new nodes join the graph through --edges


def predict_file(input_path, output_path, raw=False, images=None, edges=None):
    """Run the node's program in predict mode on a CSV (or JSON) table; write OUTPUT_PATH."""
    output_path = Path(output_path).resolve()
    env = {{**os.environ, "MCGS_MODE": "predict", "MCGS_MODEL_FILE": str(HERE / "working" / "model.joblib"),
           "MCGS_PREDICT_INPUT": str(Path(input_path).resolve()), "MCGS_PREDICT_OUTPUT": str(output_path),
           **_media_env(input_path, images), **_graph_env(edges)}}
    res = subprocess.run([sys.executable, "solution.py"], cwd=HERE, env=env, capture_output=True, text=True)
    if res.returncode != 0:
        raise RuntimeError("prediction failed:\\n" + res.stderr[-3000:])
    return _keep_layout(output_path, raw)

'''

ENSEMBLE_PREDICT_PY = '''#!/usr/bin/env python
"""Predictions of mcgs ensemble node {seq} ({task}): each member (members/<node>/) predicts with its
own fitted models, then the ensemble's program blends them with the weights of the run.

    python predict.py IN.csv OUT.csv          # OUT in the submission format
    python predict.py IN.csv OUT.csv --raw    # OUT in the prediction-column layout
{media_doc}
or, from Python: ``from predict import predict; predict(dataframe)``. Needs only the packages in
requirements.txt (not mcgs).
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
MEMBERS = {members!r}
MEDIA_COLUMN = {media!r}  # an image task's column of file names, else None
GRAPH = {graph!r}  # a graph task: new nodes join the graph through --edges


def _run(cwd, env):
    res = subprocess.run([sys.executable, "solution.py"], cwd=cwd, env=env, capture_output=True, text=True)
    if res.returncode != 0:
        raise RuntimeError(f"prediction failed in {{cwd}}:\\n" + res.stderr[-3000:])


def predict_file(input_path, output_path, raw=False, images=None, edges=None):
    """Predict a CSV (or JSON) table with every member, blend, and write OUTPUT_PATH."""
    media = {{**_media_env(input_path, images), **_graph_env(edges)}}
    input_path, output_path = str(Path(input_path).resolve()), Path(output_path).resolve()
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        (tmp / "input").symlink_to(HERE / "input", target_is_directory=True)
        for name in MEMBERS:
            member = HERE / "members" / name
            out = tmp / (name + ".csv")
            _run(member, {{**os.environ, "MCGS_MODE": "predict", "MCGS_MODEL_FILE": str(member / "working" / "model.joblib"),
                          "MCGS_PREDICT_INPUT": input_path, "MCGS_PREDICT_OUTPUT": str(out), **media}})
            work = tmp / "members" / name / "working"
            work.mkdir(parents=True)
            shutil.copyfile(member / "working" / "oof.csv", work / "oof.csv")
            os.replace(str(out) + ".raw.csv", work / "test_pred.csv")
        shutil.copyfile(HERE / "solution.py", tmp / "solution.py")
        _run(tmp, {{**os.environ, "MCGS_MODE": "predict", "MCGS_PREDICT_INPUT": input_path, "MCGS_PREDICT_OUTPUT": str(output_path)}})
    return _keep_layout(output_path, raw)

'''

ENSEMBLE_TRAIN_PY = '''#!/usr/bin/env python
"""Refit every member of mcgs ensemble node {seq} on all training rows (each member's train.py);
the blend weights stay those chosen on the run's OOF predictions."""
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
for name in {members!r}:
    code = subprocess.run([sys.executable, "train.py"], cwd=HERE / "members" / name).returncode
    if code:
        sys.exit(code)
'''

TRAIN_PY = '''#!/usr/bin/env python
"""Refit mcgs node {seq}'s program on every training row (input/train) and save the estimators to
working/model.joblib; the fold models of the run are kept as working/model.cv.joblib."""
import os
import shutil
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
model = HERE / "working" / "model.joblib"
backup = HERE / "working" / "model.cv.joblib"
if model.exists() and not backup.exists():
    shutil.copyfile(model, backup)
env = {{**os.environ, "MCGS_MODE": "refit", "MCGS_MODEL_FILE": str(model)}}
sys.exit(subprocess.run([sys.executable, "solution.py"], cwd=HERE, env=env).returncode)
'''


FORECAST_PY = '''#!/usr/bin/env python
"""Forecasts of an mcgs forecasting node, exported (forecast.json names the task, the series,
the horizon and the members; MODEL_CARD.md what the run measured).

    python forecast.py HISTORY.csv OUT.csv

HISTORY holds the time column and every input series forecast.json lists, in time order and in
their own units, with at least as many rows as the longest look-back a member asks for (try
example_history.csv). OUT holds the time of each of the next `horizon` steps after HISTORY's last
row and each target's forecast, in the same units. From Python:
``from forecast import forecast; forecast(dataframe)`` returns that table. Needs only the
packages in requirements.txt (not mcgs).
"""
import json
import os
import struct
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd

HERE = Path(__file__).resolve().parent
SPEC = json.loads((HERE / "forecast.json").read_text())
sys.path.insert(0, str(HERE / "input"))
from mcgs_forecast import TIME_FLAG, _read, _write  # noqa: E402  the window protocol, the side the run's programs use


def _member_forecast(folder, scaled, when):
    """One member's forecast (horizon x targets, scaled) of the window after the last row of
    SCALED; WHEN is the time of the first forecast row (seconds since 1970), for a member that
    asks for it."""
    horizon, n_targets = SPEC["horizon"], len(SPEC["targets"])
    to_child_r, to_child_w = os.pipe()
    from_child_r, from_child_w = os.pipe()
    env = {**os.environ, "MCGS_MODE": "forecast", "MCGS_FORECAST_FDS": f"{to_child_r},{from_child_w}"}
    with tempfile.TemporaryFile() as err:
        proc = subprocess.Popen([sys.executable, "solution.py"], cwd=folder, env=env, pass_fds=(to_child_r, from_child_w),
                                stdout=subprocess.DEVNULL, stderr=err)
        os.close(to_child_r)
        os.close(from_child_w)
        try:
            asked = struct.unpack("<i", _read(from_child_r, 4))[0]
            with_time, lookback = bool(asked & TIME_FLAG), asked & ~TIME_FLAG
            if lookback > len(scaled):
                raise ValueError(f"member {folder.name} forecasts from the last {lookback} rows; the history has {len(scaled)}: give a longer one")
            _write(to_child_w, struct.pack("<iii", 1, lookback, scaled.shape[1]))
            if with_time:
                _write(to_child_w, struct.pack("<q", when))
            _write(to_child_w, np.ascontiguousarray(scaled[-lookback:], dtype="<f4").tobytes())
            out = np.frombuffer(_read(from_child_r, horizon * n_targets * 4), dtype="<f4").reshape(horizon, n_targets)
        except (EOFError, BrokenPipeError):
            proc.wait(timeout=60)
            err.seek(0)
            raise RuntimeError(f"member {folder.name} failed in forecast mode:\\n" + err.read().decode(errors="replace")[-3000:]) from None
        finally:
            os.close(to_child_w)
            os.close(from_child_r)
        if proc.wait(timeout=600) != 0:
            err.seek(0)
            raise RuntimeError(f"member {folder.name} failed in forecast mode:\\n" + err.read().decode(errors="replace")[-3000:])
    return out.astype(np.float64)


def forecast(history):
    """The next SPEC["horizon"] steps after the last row of HISTORY (a DataFrame with the time
    column and the input series): a DataFrame of the future times and each target's forecast."""
    time_col, inputs, targets = SPEC["time"], SPEC["inputs"], SPEC["targets"]
    missing = [c for c in [time_col, *inputs] if c not in history.columns]
    if missing:
        raise ValueError(f"the history lacks the column(s) {', '.join(missing)}; it needs {time_col!r} and {', '.join(inputs)}")
    values = history[inputs].apply(pd.to_numeric, errors="coerce").to_numpy(dtype=np.float64)
    if not np.isfinite(values).all():
        col = next(c for j, c in enumerate(inputs) if not np.isfinite(values[:, j]).all())
        raise ValueError(f"the series {col!r} of the history has a missing or non-numeric value; fill it first")
    mean, std = np.asarray(SPEC["mean"]), np.asarray(SPEC["std"])
    scaled = (values - mean) / std
    times = pd.to_datetime(history[time_col])
    step = pd.tseries.frequencies.to_offset(SPEC["step"]) if SPEC["step"] else (times.iloc[-1] - times.iloc[-2])
    first = times.iloc[-1] + step
    when = int((first.tz_convert(None) if first.tzinfo else first).timestamp()) if SPEC["step"] else -1
    weights = SPEC["members"]
    pred = sum(w * _member_forecast(HERE / "members" / name, scaled, when) for name, w in weights.items()) / sum(weights.values())
    idx = [inputs.index(t) for t in targets]
    pred = pred * std[idx] + mean[idx]
    frame = pd.DataFrame(pred, columns=targets)
    frame.insert(0, time_col, pd.date_range(times.iloc[-1] + step, periods=SPEC["horizon"], freq=step))
    return frame


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: python forecast.py HISTORY.csv OUT.csv")
    try:
        forecast(pd.read_csv(sys.argv[1])).to_csv(sys.argv[2], index=False)
    except (ValueError, RuntimeError, OSError) as exc:
        sys.exit(f"error: {exc}")
    print(sys.argv[2])


if __name__ == "__main__":
    main()
'''


def _imports(code: str) -> set[str]:
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return set()
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
    return names


def _requirements(code: str, versions: dict[str, str]) -> str:
    from importlib import metadata

    lines = []
    for mod in sorted(_imports(code) | {"joblib", "numpy", "pandas", "sklearn"}):  # estimators pickle sklearn classes
        dist = _DISTRIBUTIONS.get(mod)
        if dist is None:
            continue
        version = versions.get(dist)
        if version is None:
            try:
                version = metadata.version(dist)
            except metadata.PackageNotFoundError:
                version = None
        # a local build label (2.13.0+cpu) names no release on the package index: the release it builds
        lines.append(f"{dist}=={version.split('+')[0]}" if version else dist)
    return "\n".join(lines) + "\n"


def _lineage(run, node) -> list[dict[str, Any]]:
    by_id = {n.id: n for n in run.nodes}
    chain = []
    cur = node
    while cur is not None and cur.parent_id is not None:
        chain.append({"node": cur.seq, "operator": cur.operator.value, "score": cur.score, "plan": (cur.plan or "")[:160]})
        cur = by_id.get(cur.parent_id)
    return list(reversed(chain))


def _copy_input(run, dest: Path) -> None:
    src = run.input_dir
    shutil.copytree(src, dest / "input", copy_function=shutil.copyfile)
    for p in [dest / "input", *(dest / "input").rglob("*")]:  # the run's copy is read-only; the export is the user's
        os.chmod(p, 0o755 if p.is_dir() else 0o644)


def _interpretable(run, node) -> bool:
    from mcgs.knowledge_base import load_entries

    entries = {e.id: e for e in load_entries()}
    models = [k for k in node.knowledge_ids if k.startswith("model.")]
    return bool(models) and all(entries[k].recipe is not None and entries[k].recipe.interpretable for k in models if k in entries)


def _predict_ms_per_row(run, folder: Path, node) -> float:
    """Wall time of one ``predict.py`` run on the task's test table, in ms per test row.

    The node's code is untrusted like every candidate: it runs in the run's sandbox (its
    isolation, limits and scrubbed environment: no secrets, no network), on a throwaway copy of
    the export folder next to it, so nothing it does reaches the folder handed to the user.

    Raises:
        ExportError: the program fails in predict mode (its error is named).
    """
    from mcgs.candidate_files import remove_tree
    from mcgs.contract import test_table_name
    from mcgs.sandbox import Outcome, run_program

    members = len(node.config.get("weights", {})) if node.operator.value == "ensemble" else 1
    ws = folder.with_name(folder.name + ".measure")
    remove_tree(ws)
    if run.task.forecast is not None:  # one forecast from the example history
        program, args = "forecast.py", ["example_history.csv", "measure/out.csv"]
    else:
        program, args = "predict.py", [f"input/{test_table_name(run.task)}", "measure/out.csv", *_test_media_arg(run)]
    try:
        shutil.copytree(folder, ws, symlinks=True)
        (ws / "measure").mkdir()
        limits = run.sandbox_limits(run.settings.per_run_timeout_s * max(1, members), threads=run.settings.cpu_threads)
        res = run_program(ws, program, limits, args=args)
    finally:
        remove_tree(ws)
    if res.outcome is not Outcome.OK:
        detail = res.stderr_tail[-1500:].strip() or res.error or res.outcome.value
        raise ExportError(f"node {node.seq}'s exported program failed in {'forecast' if run.task.forecast else 'predict'} mode "
                          f"({res.outcome.value}): {detail}")
    per = 1 if run.task.forecast is not None else max(1, run.task.n_test)
    return round(1000 * res.runtime_s / per, 3)


def _model_files(folder: Path) -> list[Path]:
    """The fitted models of an export: ``model.joblib`` files, or a forecast's ``working/model/`` trees."""
    models = list(folder.rglob("model.joblib"))
    for tree in folder.glob("members/*/working/model"):
        models += [p for p in tree.rglob("*") if p.is_file() and not p.is_symlink()]
    return models


def measure_constraints(run, folder: Path, node) -> dict[str, Any]:
    """Measure an exported folder against the task's constraints.

    Returns:
        ``{"ms_per_row", "model_mb", "interpretable", "passed": [...], "failed": [...]}``;
        ``ms_per_row`` is the wall time of ``predict.py`` on the task's test table (a fresh
        process in the run's sandbox: start-up, feature computation and prediction), divided by
        its rows. A time over
        ``max_inference_ms_per_row`` is measured once more and the faster run kept: other work on
        the machine only ever adds to a wall time, so the minimum is the better estimate of the
        program's own cost (the rule of Python's ``timeit``).

    Raises:
        ExportError: the exported program fails in predict mode.
    """
    limit = run.task.constraints.max_inference_ms_per_row
    ms_per_row = _predict_ms_per_row(run, folder, node)
    if limit is not None and ms_per_row > limit:
        ms_per_row = min(ms_per_row, _predict_ms_per_row(run, folder, node))
    out: dict[str, Any] = {
        "ms_per_row": ms_per_row,
        "model_mb": round(sum(p.stat().st_size for p in _model_files(folder)) / 2**20, 3),
        "interpretable": node.operator.value != "ensemble" and _interpretable(run, node),
        "passed": [],
        "failed": [],
    }
    c = run.task.constraints
    checks = []
    if c.max_inference_ms_per_row is not None:
        checks.append((f"max_inference_ms_per_row={c.max_inference_ms_per_row:g}", out["ms_per_row"] <= c.max_inference_ms_per_row))
    if c.max_model_mb is not None:
        checks.append((f"max_model_mb={c.max_model_mb:g}", out["model_mb"] <= c.max_model_mb))
    if c.interpretable:
        checks.append(("interpretable", out["interpretable"]))
    for name, ok in checks:
        out["passed" if ok else "failed"].append(name)
    return out


def _write_folder(run, node, dest: Path, shared_input: Path | None = None) -> None:
    """A single node's export in ``dest``; ``shared_input``: link ``input`` there instead of copying."""
    from mcgs.candidate_files import CandidateFileError, copy_candidate_file

    ws = run.node_dir(node)
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    (dest / "working").mkdir()
    try:
        copy_candidate_file(ws, MODEL_FILE, dest / MODEL_FILE, max_bytes=run.max_output_bytes)
    except CandidateFileError as exc:
        why = str(exc) if exc.kind != "missing" else (
            _skip_reason(ws) or "its program did not save its fitted estimators (solution contract 1.1, docs/solution_contract.md)")
        raise ExportError(f"node {node.seq} cannot be exported: {why}; export another node with --node N") from None
    (dest / "solution.py").write_text(node.code)
    if shared_input is None:
        _copy_input(run, dest)
    else:
        (dest / "input").symlink_to(os.path.relpath(shared_input, dest), target_is_directory=True)
    (dest / "predict.py").write_text(PREDICT_PY.format(seq=node.seq, task=run.task.name, **_media_fields(run)) + _PREDICT_TAIL)
    (dest / "train.py").write_text(TRAIN_PY.format(seq=node.seq))
    (dest / "requirements.txt").write_text(_requirements(node.code, run.record.package_versions))


def _media_fields(run) -> dict[str, Any]:
    """The image column (or None), whether the task is a graph, and the usage line of
    ``--images`` / ``--edges`` for a ``predict.py``."""
    media, graph = run.task.media, run.task.graph is not None
    if graph:
        return {"media": None, "graph": True, "media_doc": "    python predict.py IN.csv OUT.csv --edges EDGES.csv   # IN's nodes that are new to "
                                                            "the graph join it through EDGES (the task's edge columns)\n"}
    if media is None:
        return {"media": None, "graph": False, "media_doc": ""}
    return {"media": media.column, "graph": False,
            "media_doc": f"    python predict.py IN.csv OUT.csv --images DIR   # the files IN's column {media.column!r} "
                         "names are in DIR, a folder or .zip (default: IN's folder)\n"}


def _test_media_arg(run) -> list[str]:
    """``predict.py``'s ``--images`` for the run's own test table (its files in ``input/``)."""
    media = run.task.media
    if media is None:
        return []
    src = media.test
    where = src.input_path
    if not src.is_zip and src.prefix:
        where = f"{where}/{src.prefix.rstrip('/')}"
    return ["--images", where]


def _skip_reason(ws: Path) -> str | None:
    """Why a node's program saved no model, from its ``model.joblib.skipped.json`` (read safely,
    at most 64 KiB), or None."""
    from mcgs.candidate_files import CandidateFileError, read_candidate_file

    try:
        reason = json.loads(read_candidate_file(ws, MODEL_FILE + ".skipped.json", max_bytes=1 << 16)).get("reason")
    except (CandidateFileError, ValueError, AttributeError):
        return None
    return str(reason)[:500] if reason else None


def _ensemble_members(run, node) -> list:
    by_id = {n.id: n for n in run.nodes}
    return [by_id[int(i)] for i in node.config.get("weights", {})]


def _write_ensemble_folder(run, node, dest: Path) -> None:
    """An ensemble node's export: its program, the shared input, and each member's own export
    (with the member's OOF predictions, which the ensemble program reads) under ``members/``."""
    from mcgs.candidate_files import CandidateFileError, copy_candidate_file
    if "MCGS_MODE" not in node.code:
        raise ExportError(f"ensemble node {node.seq} was built before solution contract 1.1 and cannot predict new rows; export a member with --node N")
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    _copy_input(run, dest)
    (dest / "solution.py").write_text(node.code)
    names, code = [], ""
    for member in _ensemble_members(run, node):
        name = run.node_dir(member).name
        mdest = dest / "members" / name
        _write_folder(run, member, mdest, shared_input=dest / "input")
        try:
            copy_candidate_file(run.node_dir(member), "working/oof.csv", mdest / "working" / "oof.csv", max_bytes=run.max_output_bytes)
        except CandidateFileError as exc:
            raise ExportError(f"ensemble node {node.seq} cannot be exported: member {member.seq}: {exc}") from None
        names.append(name)
        code += member.code + "\n"
    (dest / "predict.py").write_text(ENSEMBLE_PREDICT_PY.format(seq=node.seq, task=run.task.name, members=names, **_media_fields(run)) + _PREDICT_TAIL)
    (dest / "train.py").write_text(ENSEMBLE_TRAIN_PY.format(seq=node.seq, members=names))
    (dest / "requirements.txt").write_text(_requirements(code, run.record.package_versions))


def _write_forecast_folder(run, node, dest: Path) -> None:
    """A forecasting node's export (module docstring): each member's program and its
    ``working/model/`` (copied without following links, with the run's size cap), the run's
    input, ``forecast.py`` and ``forecast.json``, and ``example_history.csv``."""
    import numpy as np
    import pandas as pd

    from mcgs.candidate_files import CandidateFileError, copy_candidate_tree
    from mcgs.forecast import HISTORY_FILE, MODEL_DIR

    f = run.task.forecast
    members = _ensemble_members(run, node) if node.operator.value == "ensemble" else [node]
    weights = node.config.get("weights", {}) if node.operator.value == "ensemble" else {str(node.id): 1.0}
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    _copy_input(run, dest)
    names, code = {}, ""
    for member in members:
        name = run.node_dir(member).name
        mdest = dest / "members" / name
        mdest.mkdir(parents=True)
        try:
            copy_candidate_tree(run.node_dir(member), MODEL_DIR, mdest / MODEL_DIR, max_bytes=run.max_output_bytes)
        except CandidateFileError as exc:
            why = "its program saved no model under working/model/ (solution contract 1.5)" if exc.kind == "missing" else str(exc)
            raise ExportError(f"node {member.seq} cannot be exported: {why}; export another node with --node N") from None
        (mdest / "solution.py").write_text(member.code)
        (mdest / "input").symlink_to(os.path.relpath(dest / "input", mdest), target_is_directory=True)
        names[name] = float(weights[str(member.id)])
        code += member.code + "\n"
    history = pd.read_csv(dest / "input" / HISTORY_FILE).tail(max(f.lookbacks))
    history[f.inputs] = history[f.inputs].to_numpy(dtype=np.float64) * np.asarray(f.std) + np.asarray(f.mean)
    history.to_csv(dest / "example_history.csv", index=False)
    spec = {"task": run.task.name, "node": node.seq, "time": f.time, "inputs": f.inputs, "targets": f.targets, "horizon": f.horizon,
            "step": f.step, "mean": f.mean, "std": f.std, "members": names}
    (dest / "forecast.json").write_text(json.dumps(spec, indent=2))
    (dest / "forecast.py").write_text(FORECAST_PY)
    (dest / "requirements.txt").write_text(_requirements(code, run.record.package_versions))


def _card(run, node, meas: dict[str, Any], rejected: list[dict[str, Any]], note: str) -> str:
    task = run.task
    c = task.constraints
    f = task.forecast
    if f is not None:
        what = [f"- Task: forecast {f.horizon} steps ahead (step {f.step or 'irregular'}) of {', '.join(f.targets)} "
                f"from the look-back of {', '.join(f.inputs)}; look-backs allowed {f.lookbacks}.",
                f"- Metric: {task.metric} on standardised values (each series scaled by the mean and standard deviation of its "
                f"{f.train_end} training rows), lower is better.",
                f"- Validation score (engine, on {len(f.validation_origins())} validation windows, rows {f.train_end}-{f.validation_end}): "
                f"{node.score:.6g}."]
    else:
        what = [f"- Task: {task.task_kind}, target {', '.join(task.target_columns)}; {task.n_test} test rows.",
                f"- Metric: {task.metric} ({'higher' if task.higher_is_better else 'lower'} is better).",
                f"- Cross-validated score (engine, out-of-fold): {node.score:.6g}"
                + (f" over {task.validation.n_splits} folds ({task.validation.kind})." if task.validation.kind else ".")]
    lines = [
        f"# Model card: {task.name}, mcgs node {node.seq}",
        "",
        *what,
        "- Private (held-out) score: not known to mcgs; the engine never reads held-out answers.",
        f"- Model: {', '.join(k for k in node.knowledge_ids if k.startswith('model.')) or 'see solution.py'}; "
        f"operator {node.operator.value}; plan: {node.plan}",
        f"- Data fingerprint (sha256 of the task's files): `{run.record.data_fingerprint}`.",
        f"- Run: `{run.record.name}` ({run.storage_url.split('://')[0]} storage), seed {run.settings.seed}, "
        f"coder {run.settings.coder}, policy {run.settings.policy}.",
    ]
    if note:
        lines.append(f"- Note: {note}")
    lines += [
        "",
        "## Constraints, measured on this folder",
        "",
        (f"- Inference: {meas['ms_per_row']} ms per forecast (`forecast.py` on `example_history.csv`, process start included)"
         if f is not None else
         f"- Inference: {meas['ms_per_row']} ms per row (`predict.py` on the {task.n_test}-row test table, process start included)")
        + (f"; limit {c.max_inference_ms_per_row:g} ms" if c.max_inference_ms_per_row is not None else "; no limit set") + ".",
        f"- Model size: {meas['model_mb']} MiB (`{'members/*/working/model/' if f is not None else 'working/model.joblib'}`)"
        + (f"; limit {c.max_model_mb:g} MiB" if c.max_model_mb is not None else "; no limit set") + ".",
        f"- Interpretable model family: {'yes' if meas['interpretable'] else 'no'}" + ("; required" if c.interpretable else "; not required") + ".",
        f"- Passed: {', '.join(meas['passed']) or 'no constraint set'}." + (f" Failed: {', '.join(meas['failed'])}." if meas["failed"] else ""),
    ]
    if rejected:
        lines += ["", "## Better-scoring nodes that broke a constraint", "", "| node | score | ms per row | model MiB | failed |", "|---|---|---|---|---|"]
        lines += [f"| {r['node']} | {r['score']:.6g} | {r['ms_per_row']} | {r['model_mb']} | {', '.join(r['failed'])} |" for r in rejected]
    if node.operator.value == "ensemble" and f is not None:
        lines += ["", "## Members (each in members/<node>/ with its own fitted model)", "", "| node | weight | score | model |", "|---|---|---|---|"]
        weights = node.config.get("weights", {})
        for m in _ensemble_members(run, node):
            lines.append(f"| {m.seq} | {weights.get(str(m.id))} | {m.score:.6g} | {', '.join(k for k in m.knowledge_ids if k.startswith('model.'))} |")
        lines.append("\nBlend: the weighted mean of the members' forecasts, weights chosen on the validation windows.")
    elif node.operator.value == "ensemble":
        lines += ["", "## Members (each in members/<node>/ with its own fitted models)", "", "| node | weight | score | model |", "|---|---|---|---|"]
        weights = node.config.get("weights", {})
        for m in _ensemble_members(run, node):
            lines.append(f"| {m.seq} | {weights.get(str(m.id))} | {m.score:.6g} | {', '.join(k for k in m.knowledge_ids if k.startswith('model.'))} |")
        lines.append(f"\nBlend: {node.config.get('blend', 'mean')}, temperature {node.config.get('temperature', 1.0)}; "
                     f"cross-fitted score of the selection: {node.config.get('nested_score')}.")
    lines += ["", "## Lineage (primary parents, from the first draft)", "", "| node | operator | score | plan |", "|---|---|---|---|"]
    for step in _lineage(run, node):
        score = "" if step["score"] is None else f"{step['score']:.6g}"
        lines.append(f"| {step['node']} | {step['operator']} | {score} | {step['plan'].replace('|', '/')} |")
    images = f" --images new_images/   # the files column {task.media.column!r} names" if task.media is not None else ""
    if task.graph is not None:
        images = "   # nodes of the graph by id; new nodes with --edges new_edges.csv linking them in"
    use = (["python forecast.py example_history.csv forecast.csv   # or your own history: the same columns, its latest rows last"]
           if f is not None else
           ["python predict.py new_rows.csv predictions.csv" + images, "python train.py        # optional: refit on all training rows"])
    lines += ["", "## Use", "", "```", "pip install -r requirements.txt", *use, "```", "",
              f"`{'forecast.py' if f is not None else 'predict.py` and `train.py'}` {'runs' if f is not None else 'run'} the node's program, which a search wrote, as an ordinary process with your "
              "permissions, network and environment: mcgs ran it (search, and the measurements above) only inside its sandbox, "
              "but nothing sandboxes it here. Read `solution.py` first, or run it in a container or as a user without access "
              "to anything it should not see.", ""]
    return "\n".join(lines)


def _check_destination(run, out_dir: Path) -> None:
    """Refuse an export folder whose replacement would destroy something: the run, the task, a
    folder holding either, or a non-empty folder that is not an earlier export."""
    dest = out_dir.resolve()
    if dest.exists() and not dest.is_dir():
        raise ExportError(f"--out {out_dir} is a file; give the path of a new folder")
    for what, folder in (("run folder", run.run_dir), ("task folder", getattr(run.task, "data_dir", None))):
        if folder is None:
            continue
        folder = Path(folder).resolve()
        if dest == folder or folder.is_relative_to(dest) or dest.is_relative_to(folder):
            raise ExportError(f"--out {out_dir} is, holds or lies inside the {what} {folder}; choose a new folder, e.g. {folder.parent / 'model'}")
    if dest.is_dir() and any(dest.iterdir()) and not (dest / "export.json").is_file():
        raise ExportError(f"--out {out_dir} exists and is not an earlier mcgs export (no export.json); choose a new or empty folder")


def _export_first_passing(run, candidates: list, staging: Path, out_dir: Path, node_seq: int | None,
                          rejected: list[dict[str, Any]], note: str) -> ExportResult | None:
    """Write each candidate to ``staging`` in turn and move the first that passes the
    constraints to ``out_dir``; the ones that fail are appended to ``rejected``."""
    from mcgs.node import Operator

    for node in candidates:
        try:
            if run.task.forecast is not None:
                _write_forecast_folder(run, node, staging)
            elif node.operator is Operator.ENSEMBLE:
                _write_ensemble_folder(run, node, staging)
            else:
                _write_folder(run, node, staging)
        except ExportError as exc:
            if node_seq is not None:
                raise
            rejected.append({"node": node.seq, "score": node.score, "ms_per_row": "-", "model_mb": "-", "failed": [str(exc)]})
            continue
        meas = measure_constraints(run, staging, node)
        if meas["failed"] and node_seq is None:
            rejected.append({"node": node.seq, "score": node.score, **meas})
            continue
        (staging / "MODEL_CARD.md").write_text(_card(run, node, meas, rejected, note))
        (staging / "export.json").write_text(json.dumps({"node": node.seq, "measurements": meas, "rejected": rejected}, indent=2, default=str))
        if out_dir.exists():
            shutil.rmtree(out_dir)
        os.replace(staging, out_dir)
        return ExportResult(out_dir, node.seq, meas, rejected)
    return None


def export_node(run, out_dir: str | Path, node_seq: int | None = None) -> ExportResult:
    """Export a node of a run to ``out_dir`` and check the task's constraints on it.

    ``run`` is a :class:`~mcgs.snapshot.RunSnapshot` read with ``details=True``
    (``mcgs.load_run(RUN_DIR, details=True)``: no engine is started) or a
    :class:`~mcgs.search.Search`. The node's code runs only in the run's sandbox.

    Without ``node_seq``: the run's chosen node (an ensemble is exported with its members);
    if it breaks a constraint (inference time per row, model size, interpretability) or cannot
    be exported (a program that saves no fitted model), the best single node that passes is
    exported instead and the card lists the ones rejected with their measurements.

    ``out_dir`` is created, or replaced when it holds an earlier export; any other existing
    non-empty folder, and the run or task folder (or a folder containing them), is refused.

    Raises:
        ExportError: no valid node, the node is not valid or has no saved model, every
            candidate breaks a constraint, or ``out_dir`` is refused.
    """
    from mcgs.node import Operator

    from mcgs.snapshot import detailed_snapshot

    run = detailed_snapshot(run, ExportError)
    # absolute: the exported programs are run with the export folder as working directory
    out_dir = Path(out_dir).absolute()
    _check_destination(run, out_dir)
    nodes = {n.seq: n for n in run.nodes}
    note = ""
    if node_seq is not None:
        if node_seq not in nodes or nodes[node_seq].parent_id is None:
            raise ExportError(f"the run has no node {node_seq}; `mcgs status` shows the best nodes and `mcgs report` all of them")
        if not nodes[node_seq].is_valid:
            raise ExportError(f"node {node_seq} is {nodes[node_seq].state.value}, not valid: only nodes that ran and were scored can be exported")
        candidates = [nodes[node_seq]]
    else:
        final = run.chosen_node
        if final is None:
            raise ExportError("the run has no valid node to export")
        singles = sorted((n for n in nodes.values() if n.is_valid and n.full_fidelity and n.operator is not Operator.ENSEMBLE),
                         key=lambda n: (best_first(n.score, run.task.higher_is_better), n.seq))
        candidates = [final] + [n for n in singles if n.id != final.id]  # the chosen node, then the best single nodes
    rejected: list[dict[str, Any]] = []
    staging = out_dir.with_name(out_dir.name + ".staging")
    try:
        result = _export_first_passing(run, candidates, staging, out_dir, node_seq, rejected, note)
    finally:  # a failed or interrupted export leaves no half-written folder behind
        shutil.rmtree(staging, ignore_errors=True)
    if result is not None:
        return result
    raise ExportError(
        "no node passes the task's constraints: "
        + "; ".join(f"node {r['node']}: {', '.join(r['failed'])}" for r in rejected)
        + " — relax a constraint in task.yaml (constraints:) or search longer"
    )
