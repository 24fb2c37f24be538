"""The solution contract (DESIGN §2), version :data:`CONTRACT_VERSION`.

Every candidate is a standalone ``solution.py`` run with its node's workspace as working
directory. This module builds what the candidate reads (``input/task.json``, ``input/folds.csv``
and the task's public files) and names what it must write. ``docs/solution_contract.md``
describes the same contract for people; :class:`TaskJson` is its machine-checked schema.

Workspace layout::

    input/                      read-only: public files + task.json + folds.csv
    working/oof.csv             REQUIRED: row + prediction columns, one line per row with fold >= 0
    working/test_pred.csv       REQUIRED: row (0-based test position) + prediction columns
    submission/submission.csv   REQUIRED: exactly the format of sample_submission.csv
    logs/stdout.txt, logs/stderr.txt
"""

from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from mcgs.task import TaskSpec, parse_times, read_table

__all__ = [
    "CONTRACT_VERSION",
    "constant_program",
    "OOF_PATH",
    "TEST_PRED_PATH",
    "SUBMISSION_PATH",
    "TaskJson",
    "build_task_json",
    "make_folds",
    "prepare_run_input",
    "prepare_workspace",
    "pretrained_weights",
    "WEIGHT_FILES",
]

CONTRACT_VERSION = "1.5"
OOF_PATH = "working/oof.csv"
TEST_PRED_PATH = "working/test_pred.csv"
SUBMISSION_PATH = "submission/submission.csv"


class FileInfo(BaseModel):
    """A file a candidate reads: its path relative to the workspace and its format."""

    model_config = ConfigDict(extra="forbid")
    path: str
    format: Literal["csv", "json"] = "csv"


class MediaSourceInfo(BaseModel):
    """Where one table's files are: the file of a row whose file column holds ``v`` is
    ``os.path.join(source, prefix + v)`` for a folder, member ``prefix + v`` of the zip
    ``source`` for an archive."""

    model_config = ConfigDict(extra="forbid")
    source: str
    prefix: str = ""
    archive: bool = False


class MediaInfo(BaseModel):
    """The files of a task made of files (added in 1.3)."""

    model_config = ConfigDict(extra="forbid")
    kind: str
    column: str
    train: MediaSourceInfo
    test: MediaSourceInfo


class GraphInfo(BaseModel):
    """The graph of a graph task (added in 1.4): the rows of the training and test tables are
    its nodes, keyed by ``id_column``; ``edges`` is a CSV of one edge per line (columns
    ``source`` and ``target``, node ids); ``nodes`` a CSV of the graph's other nodes (the test
    table's columns, no label), or None."""

    model_config = ConfigDict(extra="forbid")
    edges: str
    nodes: str | None = None
    id_column: str
    source: str
    target: str
    directed: bool = False


class ForecastInfo(BaseModel):
    """A forecasting task (added in 1.5; :mod:`mcgs.forecast`): the history a program reads in
    search mode, its series, the horizon, the look-backs it may choose and the validation
    windows it must forecast."""

    model_config = ConfigDict(extra="forbid")
    history: str
    time_column: str
    input_columns: list[str]
    target_columns: list[str]
    horizon: int
    lookbacks: list[int]
    train_rows: int
    validation_origins: dict[str, int]
    output: str
    model_dir: str
    client: str
    scaling: str
    rule: str


class ValidationInfo(BaseModel):
    """The fold scheme, as told to the candidate."""

    model_config = ConfigDict(extra="forbid")
    kind: str
    n_splits: int
    folds_file: str = "input/folds.csv"
    rule: str


class OutputsInfo(BaseModel):
    """Where the candidate must write its three required outputs."""

    model_config = ConfigDict(extra="forbid")
    oof: str = OOF_PATH
    test_pred: str = TEST_PRED_PATH
    submission: str = SUBMISSION_PATH


class TaskJson(BaseModel):
    """Schema of ``input/task.json`` (contract version :data:`CONTRACT_VERSION`).

    Attributes:
        contract_version: Version of this contract; bumped on any incompatible change.
        task_name, description: What the task is.
        task_kind: binary, multiclass, multilabel, regression, multi_target_regression.
        metric, higher_is_better: For information only; the engine scores.
        files: ``train``, ``test``, ``sample_submission`` -> :class:`FileInfo`.
        id_column: Column identifying test rows (or None: match by row order).
        target_columns: Columns to predict.
        prediction_columns: Columns of ``oof.csv`` and ``test_pred.csv`` besides ``row``.
        submission_columns: Columns of ``submission.csv``, in order.
        submission_format: ``label`` (class labels as in the training file), ``probability``
            (positive-class probability / per-class probabilities) or ``value``.
        class_labels, positive_class: For classification.
        echo_columns: Submission columns copied from the test table (by row order).
        text_columns: The columns a submission copies from the test table (the id and the echo
            columns), to be read as text so they are written back as written (``00301``);
            added in 1.2.
        extra_files: Extra input files or folders, as paths relative to the workspace.
        media: For a task made of files (an image per row): the column naming each row's file
            and where the training and test rows' files are (:class:`MediaInfo`); None for a
            table task. Added in 1.3.
        graph: For a graph task, its edge list and other nodes (:class:`GraphInfo`); None
            otherwise. Added in 1.4.
        forecast: For a forecasting task (:class:`ForecastInfo`); None otherwise. Added in
            1.5. Such a task has no oof/test/submission outputs (``outputs`` None): its program
            writes the validation forecasts and answers test windows in forecast mode.
        validation: Fold scheme and rule.
        outputs: Required output paths.
    """

    model_config = ConfigDict(extra="forbid")

    contract_version: str = CONTRACT_VERSION
    task_name: str
    description: str = ""
    task_kind: str
    metric: str
    higher_is_better: bool
    files: dict[str, FileInfo]
    id_column: str | None
    target_columns: list[str]
    prediction_columns: list[str]
    submission_columns: list[str]
    submission_format: str
    class_labels: list[Any] | None = None
    positive_class: Any = None
    echo_columns: list[str] = []
    text_columns: list[str] = []
    extra_files: list[str] = []
    media: MediaInfo | None = None
    graph: GraphInfo | None = None
    forecast: ForecastInfo | None = None
    validation: ValidationInfo
    outputs: OutputsInfo | None = OutputsInfo()


_RULES = {
    "stratified_kfold": "for each fold k >= 0: fit on rows with fold != k, predict rows with fold == k",
    "kfold": "for each fold k >= 0: fit on rows with fold != k, predict rows with fold == k",
    "group_kfold": "for each fold k >= 0: fit on rows with fold != k, predict rows with fold == k",
    "time_split": "for each fold k >= 0: fit only on rows with fold == -1 or 0 <= fold < k (the past), predict rows with fold == k",
    "holdout": "fold 0 is the only validated fold: fit on rows with fold != 0 (fold -1 rows only ever train), predict rows with fold == 0",
    "predefined": "the task's own split: for each fold k >= 0: fit on rows with fold != k (fold -1 rows only ever train), predict rows with fold == k",
}


def _format(name: str) -> str:
    return "json" if name.lower().endswith((".json", ".jsonl")) else "csv"


#: The test table written into ``input/`` for a task that has none (its rows are the sample
#: submission's ids: :attr:`mcgs.task.TaskSpec.test_path`).
DERIVED_TEST = "test.csv"


def test_table_name(spec: TaskSpec) -> str:
    """The test table's name inside ``input/``: the task's own, or :data:`DERIVED_TEST` (the
    sample submission's id column) when the task's test rows are the sample submission's."""
    return DERIVED_TEST if spec.test_file == spec.sample_submission_file else spec.test_file


def _media_info(spec: TaskSpec) -> MediaInfo | None:
    m = spec.media
    if m is None:
        return None
    src = {split: MediaSourceInfo(source=s.input_path, prefix=s.prefix, archive=s.is_zip)
           for split, s in (("train", m.train), ("test", m.test))}
    return MediaInfo(kind=m.kind, column=m.column, **src)


FORECAST_RULE = ("fit only on rows [0, train_rows) of the history (the validation rows may stop training early, never fit a model "
                 "or a scaler); for each validation origin t (range(start, stop, step)) forecast rows [t, t + horizon) of the "
                 "targets from the look-back rows [t - L, t): write them to `output` as float32 (windows, horizon, targets); "
                 "in forecast mode (MCGS_MODE=forecast) load the model from `model_dir` and answer windows with `client`'s serve()")


def _forecast_task_json(spec: TaskSpec, description_limit: int) -> TaskJson:
    from mcgs.forecast import HISTORY_FILE, MODEL_DIR, VAL_FORECAST_PATH

    f = spec.forecast
    origins = f.validation_origins()
    return TaskJson(
        task_name=spec.name, description=spec.description[:description_limit], task_kind="forecast", metric=spec.metric,
        higher_is_better=spec.higher_is_better, files={"history": FileInfo(path=f"input/{HISTORY_FILE}")}, id_column=None,
        target_columns=f.targets, prediction_columns=f.targets, submission_columns=spec.submission_columns, submission_format="value",
        forecast=ForecastInfo(history=f"input/{HISTORY_FILE}", time_column=f.time, input_columns=f.inputs, target_columns=f.targets,
                              horizon=f.horizon, lookbacks=f.lookbacks, train_rows=f.train_end,
                              validation_origins={"start": origins.start, "stop": origins.stop, "step": origins.step},
                              output=VAL_FORECAST_PATH, model_dir=MODEL_DIR, client="input/mcgs_forecast.py", scaling=f.scaling,
                              rule=FORECAST_RULE),
        validation=ValidationInfo(kind="forecast_borders", n_splits=1, folds_file="", rule=FORECAST_RULE), outputs=None,
    )


def build_task_json(spec: TaskSpec, description_limit: int = 20000) -> TaskJson:
    """Build the ``input/task.json`` document for a task.

    Args:
        spec: The task.
        description_limit: Characters of the description kept (long descriptions are cut).
    """
    if spec.forecast is not None:
        return _forecast_task_json(spec, description_limit)
    return TaskJson(
        task_name=spec.name,
        description=spec.description[:description_limit],
        task_kind=spec.task_kind,
        metric=spec.metric,
        higher_is_better=spec.higher_is_better,
        files={
            "train": FileInfo(path=f"input/{spec.train_file}", format=_format(spec.train_file)),
            "test": FileInfo(path=f"input/{test_table_name(spec)}", format=_format(test_table_name(spec))),
            "sample_submission": FileInfo(path=f"input/{spec.sample_submission_file}"),
        },
        echo_columns=spec.echo_columns,
        text_columns=([spec.id_column] if spec.id_column else []) + list(spec.echo_columns),
        extra_files=[f"input/{name}" for name in spec.extra_files],
        id_column=spec.id_column,
        target_columns=spec.target_columns,
        prediction_columns=spec.prediction_columns,
        submission_columns=spec.submission_columns,
        submission_format=spec.submission_format,
        class_labels=spec.class_labels,
        positive_class=spec.positive_class,
        media=_media_info(spec),
        graph=None if spec.graph is None else GraphInfo(
            edges=f"input/{spec.graph.edges}", nodes=f"input/{spec.graph.nodes}" if spec.graph.nodes else None, id_column=spec.id_column,
            source=spec.graph.source, target=spec.graph.target, directed=spec.graph.directed),
        validation=ValidationInfo(kind=spec.validation.kind or "kfold", n_splits=spec.validation.n_splits, rule=_RULES[spec.validation.kind or "kfold"]),
    )


def make_folds(spec: TaskSpec, train) -> "Any":
    """Assign every training row to a fold with the task's validation scheme.

    Uses scikit-learn's splitters (``StratifiedKFold``, ``KFold``, ``GroupKFold`` with the
    scheme's seed). For ``time_split`` rows are ordered by the time column and cut into
    ``n_splits + 1`` equal chunks; the first chunk gets fold -1 (never validated). For ``holdout``
    the first fold of a (stratified, for classification) k-fold split is fold 0 and every other
    row gets fold -1.

    Args:
        spec: The task.
        train: The training table as read by pandas, shape (n_train, n_columns).

    Returns:
        A DataFrame with columns ``row`` (0-based position) and ``fold``, shape (n_train, 2).
    """
    import numpy as np
    import pandas as pd
    from sklearn.model_selection import GroupKFold, KFold, StratifiedKFold

    v = spec.validation
    n = len(train)
    fold = np.full(n, -1, dtype=int)
    idx = np.arange(n)
    stratified = v.kind == "stratified_kfold" or (v.kind == "holdout" and spec.task_kind in ("binary", "multiclass"))
    if stratified:
        y = train[spec.target_columns[0]].astype(str).to_numpy()
        splits = StratifiedKFold(v.n_splits, shuffle=True, random_state=v.seed).split(idx, y)
    elif v.kind == "group_kfold":
        groups = train[v.group_column].astype(str).to_numpy()
        splits = GroupKFold(v.n_splits, shuffle=True, random_state=v.seed).split(idx, groups=groups)
    elif v.kind == "predefined":
        return pd.DataFrame({"row": idx, "fold": pd.to_numeric(train[v.fold_column]).astype(int).to_numpy()})
    elif v.kind == "time_split":
        order = np.argsort(parse_times(train[v.time_column], v.time_format).to_numpy(), kind="stable")
        chunks = np.array_split(order, v.n_splits + 1)
        splits = ((None, c) for c in chunks[1:])
    else:
        splits = KFold(v.n_splits, shuffle=True, random_state=v.seed).split(idx)
    for k, (_, valid) in enumerate(splits):
        fold[valid] = k
        if v.kind == "holdout":
            break
    return pd.DataFrame({"row": idx, "fold": fold})


def _make_read_only(path: Path) -> None:
    mode = path.stat().st_mode
    path.chmod(mode & ~(stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH))


_CONSTANT_PROGRAM = '''"""A minimal candidate of the solution contract: the same value for every OOF and test row
and the sample submission as the submission. Needs no library beyond the standard one."""
import csv, json, os, shutil
task = json.load(open("input/task.json"))
cols = task["prediction_columns"]
os.makedirs("working", exist_ok=True)
os.makedirs("submission", exist_ok=True)
with open("input/folds.csv") as f:
    rows = [r["row"] for r in csv.DictReader(f) if int(r["fold"]) >= 0]
with open("working/oof.csv", "w", newline="") as f:
    w = csv.writer(f)
    w.writerow(["row", *cols])
    w.writerows([r, *[VALUE] * len(cols)] for r in rows)
with open(task["files"]["test"]["path"]) as f:
    n_test = sum(1 for _ in csv.reader(f)) - 1
with open("working/test_pred.csv", "w", newline="") as f:
    w = csv.writer(f)
    w.writerow(["row", *cols])
    w.writerows([i, *[VALUE] * len(cols)] for i in range(n_test))
shutil.copyfile(task["files"]["sample_submission"]["path"], "submission/submission.csv")
'''


def constant_program(value: float = 0.5) -> str:
    """A minimal valid candidate (standard library only): ``value`` as every prediction of the
    OOF and test rows, and the sample submission as its submission. Used where the engine, not
    the models, is under test or measured (many-worker tests, the memory benchmark).

    Valid for tasks whose prediction columns are probabilities or values (``value`` must suit
    the metric, e.g. within [0, 1] for probabilities).
    """
    return _CONSTANT_PROGRAM.replace("VALUE", repr(float(value)))


#: Pretrained weights a program may load, by backbone: the file names accepted in the
#: ``weights_dir`` setting's folder (torchvision's release file names and a plain one).
WEIGHT_FILES = {"resnet18": ("resnet18.pth", "resnet18-f37072fd.pth")}
#: Where they are in ``input/`` (read-only like the rest of it).
WEIGHTS_FOLDER = "weights"


def pretrained_weights(weights_dir: Path | None) -> dict[str, Path]:
    """The known backbones whose weights are in ``weights_dir`` (:data:`WEIGHT_FILES`), by
    name; empty without a folder. Nothing is ever downloaded."""
    if weights_dir is None:
        return {}
    found = {}
    for name, files in WEIGHT_FILES.items():
        path = next((Path(weights_dir) / f for f in files if (Path(weights_dir) / f).is_file()), None)
        if path is not None:
            found[name] = path
    return found


def prepare_run_input(spec: TaskSpec, run_dir: Path, weights_dir: Path | None = None) -> Path:
    """Write the run's shared, read-only ``input/`` folder once (idempotent).

    Copies the public files (never anything else from the task folder: held-out answers stay
    out), the known pretrained weights found in ``weights_dir`` into ``input/weights/<name>.pth``
    (:func:`pretrained_weights`), writes ``task.json`` and ``folds.csv``, and removes write
    permission.

    Returns:
        The path of ``RUN_DIR/input``.
    """

    inp = run_dir / "input"
    marker = inp / "task.json"
    if marker.is_file():
        return inp
    tmp = run_dir / "input.tmp"
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir(parents=True)
    if spec.forecast is not None:
        _forecast_input(spec, run_dir, tmp)
        os.replace(tmp, inp)
        return inp
    for name in (spec.train_file, spec.test_file, spec.sample_submission_file):
        shutil.copyfile(spec.data_dir / name, tmp / name)
    if spec.test_file == spec.sample_submission_file:  # no test table: the sample's ids, without its prediction columns
        import pandas as pd

        ids = pd.read_csv(spec.sample_submission_path, usecols=[spec.id_column], dtype=str, keep_default_na=False)
        ids.to_csv(tmp / DERIVED_TEST, index=False)
    desc = spec.data_dir / "description.md"
    if desc.is_file():
        shutil.copyfile(desc, tmp / "description.md")
    for name in spec.extra_files:
        src = spec.data_dir / name
        if src.is_dir():
            shutil.copytree(src, tmp / name, copy_function=shutil.copyfile)
        else:
            shutil.copyfile(src, tmp / name)
    for name, path in pretrained_weights(weights_dir).items():
        (tmp / WEIGHTS_FOLDER).mkdir(exist_ok=True)
        shutil.copyfile(path, tmp / WEIGHTS_FOLDER / f"{name}.pth")
    train = read_table(spec.train_path)
    try:
        folds = make_folds(spec, train)
    except ValueError as exc:  # scikit-learn's splitters: a scheme the rows cannot satisfy
        from mcgs.task import TaskError

        v = spec.validation
        raise TaskError(f"cannot split the training rows with validation: {{kind: {v.kind}, n_splits: {v.n_splits}}}: {exc}; "
                        f"lower validation.n_splits in task.yaml" + (f" or choose another validation.group_column than {v.group_column!r}"
                                                                      if v.kind == "group_kfold" else "")) from None
    folds.to_csv(tmp / "folds.csv", index=False)
    (tmp / "task.json").write_text(build_task_json(spec).model_dump_json(indent=2))
    for p in [*tmp.rglob("*")]:
        _make_read_only(p)
    os.replace(tmp, inp)
    return inp


def _forecast_input(spec: TaskSpec, run_dir: Path, tmp: Path) -> None:
    """A forecasting task's input: ``history.csv`` (the training and validation rows, scaled),
    ``mcgs_forecast.py`` (forecast mode's client) and ``task.json``; the rows after them (the
    test part) never enter it. The engine's own copy of every row it needs (scaled, float64) is
    ``RUN_DIR/private/series.npy``, outside every sandbox."""
    import numpy as np

    from mcgs.forecast import HISTORY_FILE, read_series

    f = spec.forecast
    last = f.test_end if f.test_end is not None else f.n_rows
    times, values = read_series(spec.data_dir, f, last)
    history = pd_frame(times.iloc[: f.visible_rows], values[: f.visible_rows], f.inputs)
    history.to_csv(tmp / HISTORY_FILE, index=False, float_format="%.7g")
    shutil.copyfile(Path(__file__).with_name("forecast_client.py"), tmp / "mcgs_forecast.py")
    (tmp / "task.json").write_text(build_task_json(spec).model_dump_json(indent=2))
    private = run_dir / "private"
    private.mkdir(exist_ok=True)
    np.save(private / "series.tmp.npy", values)
    os.replace(private / "series.tmp.npy", private / "series.npy")
    for p in [*tmp.rglob("*")]:
        _make_read_only(p)


def pd_frame(times, values, columns):
    """A history table: the time column, then one column per series."""
    import pandas as pd

    frame = pd.DataFrame(values, columns=columns)
    frame.insert(0, times.name, times.to_numpy())
    return frame


def prepare_workspace(run_input: Path, workspace: Path, code: str) -> Path:
    """Create a node's workspace: ``input`` (link to the run's read-only input), ``working/``,
    ``submission/`` and ``solution.py``.

    A workspace that already exists (an earlier attempt of a node that is tried again) is
    removed first, links not followed: nothing a program left there is kept or written
    through (a ``solution.py`` or ``input`` it replaced with a link, say).

    Returns:
        The workspace path.
    """
    from mcgs.candidate_files import remove_tree

    if workspace.exists() or workspace.is_symlink():
        remove_tree(workspace)
    workspace.mkdir(parents=True)
    (workspace / "input").symlink_to(os.path.relpath(run_input, workspace), target_is_directory=True)
    for sub in ("working", "submission"):
        (workspace / sub).mkdir()
    (workspace / "solution.py").write_text(code)
    return workspace
