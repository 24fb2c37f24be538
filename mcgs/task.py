"""Task specification and loaders.

A :class:`TaskSpec` says everything the engine needs to know about one prediction task: where
its public files are, which columns are targets and ids, the metric and its direction, the task
kind, the class labels, and the validation scheme. It is built once per run and never changed
by a candidate.

Two folder layouts are understood (DESIGN §3):

* a **plain folder** with ``train.csv``, ``test.csv``, ``sample_submission.csv`` and a
  ``task.yaml`` (only ``metric`` is required; target and id columns are inferred from
  ``sample_submission.csv`` when unambiguous);
* an **MLE-bench competition folder** with ``config.yaml`` and ``prepared/public/`` as written
  by ``mcgs mlebench prepare``.

Every problem with the input is a :class:`TaskError` whose message names the file, column or
setting at fault and says what to add or change.
"""

from __future__ import annotations

import hashlib
import io
import json
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from mcgs.forecast import ForecastError, ForecastSetting, ForecastSpec, check_forecast
from mcgs.graph_task import GraphError, GraphSetting, GraphSpec, check_graph
from mcgs.media import MediaError, MediaSpec, check_media, detect_media, image_column
from mcgs.metrics import UnknownMetricError, get_metric

__all__ = [
    "read_table",
    "TaskError",
    "ValidationScheme",
    "TaskConstraints",
    "TaskSpec",
    "load_task",
    "data_fingerprint",
]

TaskKind = Literal["binary", "multiclass", "multilabel", "regression", "multi_target_regression", "forecast"]


class TaskError(ValueError):
    """A task folder or ``task.yaml`` is missing something or contradicts itself."""


class ValidationScheme(BaseModel):
    """How the engine splits the training rows into folds (written to ``input/folds.csv``).

    Attributes:
        kind: ``stratified_kfold`` (classification default), ``kfold`` (regression default),
            ``group_kfold`` (rows sharing ``group_column`` stay in one fold), ``time_split``
            (rows sorted by ``time_column``; the first chunk is never validated) or ``holdout``
            (one fold of a (stratified) k-fold split is validated, the other rows only train;
            the default from :data:`HOLDOUT_ROWS` training rows, and for image tasks, where a
            candidate trains one network rather than k), or ``predefined`` (the training
            table's ``fold_column`` gives each row's fold: -1 for rows that only ever train,
            0, 1, ... for the validated folds; a published split such as Planetoid's).
        n_splits: Number of folds, >= 2 (for ``holdout``: the validated share is 1/n_splits).
            Left out: by the training rows (:data:`FOLDS_BY_ROWS`), 5 below 50 000 as in most
            Kaggle solutions.
        group_column: Required for ``group_kfold``.
        time_column: Required for ``time_split``.
        fold_column: Required for ``predefined``: a training-table column of integer folds
            (>= -1), absent from the test table; never a feature.
        time_format: How ``time_column`` is written, as a ``strftime`` format (``%d/%m/%Y``), or
            ``mixed`` to parse each value on its own; None: inferred from the first value (a
            column whose values do not all follow it is refused at load, naming examples).
        seed: Shuffle seed for the k-fold schemes; fixed per task so every candidate and
            every run sees the same folds.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: Literal["stratified_kfold", "kfold", "group_kfold", "time_split", "holdout", "predefined"] | None = None
    n_splits: int | None = Field(None, ge=2, le=50)
    group_column: str | None = None
    time_column: str | None = None
    fold_column: str | None = None
    time_format: str | None = None
    seed: int = 42


class TaskConstraints(BaseModel):
    """Deployment constraints of a task (AutoML-Agent's request "constraints"; Trirat et al.,
    ICML 2025, §3.1), shown to coders.

    Attributes:
        max_inference_ms_per_row: Prediction latency budget, milliseconds per row.
        max_model_mb: Largest acceptable fitted model, megabytes.
        interpretable: Only model families a person can inspect (linear models, shallow trees,
            k-nearest neighbours); the recipe coder drafts only those.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)
    max_inference_ms_per_row: float | None = Field(None, gt=0)
    max_model_mb: float | None = Field(None, gt=0)
    interpretable: bool = False


class FilesSetting(BaseModel):
    """task.yaml's ``files``: the column that names each row's image file and where the files
    are (each left out is inferred: :func:`mcgs.media.detect_media`).

    Attributes:
        column: The column of both tables holding file names (``image``).
        train, test: Folder or zip archive inside the task folder holding the training / test
            rows' files (``images/``, ``train.zip``).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)
    column: str | None = None
    train: str | None = None
    test: str | None = None


class _TaskYaml(BaseModel):
    """Schema of a plain folder's ``task.yaml``."""

    model_config = ConfigDict(extra="forbid")

    name: str | None = None
    metric: str
    target: str | list[str] | None = None
    id_column: str | None = None
    no_id_column: bool = False
    positive_class: Any = None
    description: str | None = None
    train_file: str = "train.csv"
    test_file: str = "test.csv"
    sample_submission_file: str = "sample_submission.csv"
    extra_files: list[str] = []
    files: FilesSetting | None = None
    graph: GraphSetting | None = None
    forecast: ForecastSetting | None = None
    validation: ValidationScheme = ValidationScheme()
    constraints: TaskConstraints = TaskConstraints()

    @field_validator("target")
    @classmethod
    def _listify(cls, v):
        return [v] if isinstance(v, str) else v


class TaskSpec(BaseModel):
    """Everything fixed about a task for the whole run.

    Attributes:
        name: Short task name (folder name by default).
        data_dir: Folder holding the public files (train, test, sample submission).
        train_file, test_file, sample_submission_file: File names inside ``data_dir``.
        description: Free text shown to coders (``description.md`` when present).
        target_columns: Column(s) to predict, as named in train and the sample submission.
        id_column: Column that identifies rows in test and submission, or None (then
            submissions are matched by row order).
        submission_columns: Columns of ``sample_submission.csv``, in order.
        metric: Canonical metric name (see :mod:`mcgs.metrics`).
        higher_is_better: The metric's direction, fixed here once for the task.
        task_kind: binary, multiclass, multilabel (several 0/1 label columns, each predicted
            as a probability), regression, multi_target_regression or forecast (many steps
            ahead from a history: ``forecast`` is set).
        class_labels: Sorted class labels (JSON values) for classification, else None.
        positive_class: The positive label for binary tasks.
        submission_format: ``label`` (class labels), ``probability`` or ``value``.
        echo_columns: Columns of the sample submission that are neither the id nor
            predictions; a submission copies them from the test table (row order).
        extra_files: Other files or folders of the task (e.g. per-row geometry files, the
            folders or archives of an image task's files), copied read-only into every
            workspace's ``input/``.
        media: For a task made of files (an image per row), the column naming them and where
            they are (:class:`mcgs.media.MediaSpec`); None for a table task.
        graph: For a graph task (the rows are nodes of a graph), its edge list and other
            nodes (:class:`mcgs.graph_task.GraphSpec`); None otherwise.
        forecast: For a forecasting task, its series, borders, horizon, look-backs and scaling
            (:class:`mcgs.forecast.ForecastSpec`); ``n_train`` is then its training rows and
            ``n_test`` its test windows. None otherwise.
        validation: The fold scheme.
        constraints: Deployment constraints from the request.
        n_train, n_test: Row counts.
        notes: What the loader inferred that a user should know (said when a run starts), e.g.
            a target column taken from the training file because the sample submission holds
            one probability column per class.
    """

    model_config = ConfigDict(frozen=True)

    name: str
    data_dir: Path
    train_file: str = "train.csv"
    test_file: str = "test.csv"
    sample_submission_file: str = "sample_submission.csv"
    description: str = ""
    target_columns: list[str]
    id_column: str | None
    submission_columns: list[str]
    metric: str
    higher_is_better: bool
    task_kind: TaskKind
    class_labels: list[Any] | None = None
    positive_class: Any = None
    submission_format: Literal["label", "probability", "value"]
    echo_columns: list[str] = []
    extra_files: list[str] = []
    media: MediaSpec | None = None
    graph: GraphSpec | None = None
    forecast: ForecastSpec | None = None
    validation: ValidationScheme
    constraints: TaskConstraints = TaskConstraints()
    n_train: int
    n_test: int
    notes: list[str] = []

    @property
    def train_path(self) -> Path:
        return self.data_dir / self.train_file

    @property
    def test_path(self) -> Path:
        """The test table; the sample submission itself when the task has no test table (an
        image task whose test rows are the sample submission's ids)."""
        return self.data_dir / self.test_file

    @property
    def sample_submission_path(self) -> Path:
        return self.data_dir / self.sample_submission_file

    @property
    def prediction_columns(self) -> list[str]:
        """Columns of ``oof.csv`` / ``test_pred.csv`` (DESIGN §2)."""
        if self.task_kind == "multiclass":
            return [str(c) for c in self.class_labels or []]
        return list(self.target_columns)

    def to_json(self) -> str:
        return self.model_dump_json(indent=2)

    @classmethod
    def from_json(cls, text: str) -> "TaskSpec":
        return cls.model_validate_json(text)


# --------------------------------------------------------------------------------------------
# loading


def read_table(path: str | Path):
    """Read a task table by its suffix: ``.csv``, or ``.json`` (a list of records or JSON lines).

    List and dict cells (JSON records) become strings (lists space-joined) so every column is
    hashable and usable by the feature blocks.

    Raises:
        ValueError: the suffix is not supported.
    """
    import pandas as pd

    path = Path(path)
    suffix = path.suffix.lower()
    if suffix == ".csv":
        return pd.read_csv(path)
    if suffix in (".json", ".jsonl"):
        text = path.read_text()
        lines = suffix == ".jsonl" or not text.lstrip().startswith("[")
        df = pd.read_json(io.StringIO(text), lines=lines, orient="records" if not lines else None, dtype=False)
        for c in df.columns:
            if df[c].dtype == object and df[c].map(lambda v: isinstance(v, (list, dict))).any():
                df[c] = df[c].map(lambda v: " ".join(map(str, v)) if isinstance(v, list) else (json.dumps(v) if isinstance(v, dict) else v))
        return df
    raise ValueError(f"cannot read {path}: only .csv and .json tables are supported")


def parse_times(values, time_format: str | None = None):
    """The time column of a ``time_split`` as datetimes (a pandas Series; unparseable values
    NaT). Numbers are kept in their own order (read as nanoseconds).

    Args:
        values: The column, shape (n,).
        time_format: ``validation.time_format`` (a ``strftime`` format or ``mixed``), or None to
            infer the format from the first value, as pandas does.
    """
    import warnings

    import pandas as pd

    with warnings.catch_warnings():  # pandas warns when it falls back to parsing value by value
        warnings.simplefilter("ignore")
        return pd.to_datetime(pd.Series(values), errors="coerce", format=time_format)


def _check_time_column(train, val: "ValidationScheme", where: str, train_file: str) -> None:
    """Every value of a ``time_split``'s time column must parse with one format (silently
    dropped values would put folds out of time order).

    Raises:
        TaskError: naming the column, how many values do not parse, examples and the fix.
    """
    import pandas as pd

    col = train[val.time_column]
    if pd.api.types.is_numeric_dtype(col) and val.time_format is None:
        return
    parsed = parse_times(col, val.time_format)
    bad = col.notna().to_numpy() & parsed.isna().to_numpy()
    if bad.any():
        examples = ", ".join(repr(str(v)) for v in col[bad].astype(str).unique()[:3])
        good = col[~bad & col.notna().to_numpy()].astype(str).head(1).tolist()
        how = f"the format of its first values (such as {good[0]!r})" if val.time_format is None and good else f"time_format {val.time_format!r}"
        raise TaskError(
            f"{where}: validation.time_column {val.time_column!r} of {train_file} has {int(bad.sum())} value(s) that do not "
            f"parse with {how} ({examples}), so folds would not follow time order; write every date the same way, or set "
            f"validation.time_format in task.yaml (a strftime format such as '%d/%m/%Y', or 'mixed' to read each value on its own)"
        )


def _read_table(path: Path, what: str):
    if path.is_dir():
        raise TaskError(f"{what} file {path} is a folder, not a table; put the {what} table there as a CSV file")
    if not path.is_file():
        raise TaskError(f"{what} file {path} does not exist; add it or set its name in task.yaml")
    try:
        df = read_table(path)
    except UnicodeDecodeError as exc:
        raise TaskError(
            f"cannot read {what} file {path}: it is not UTF-8 text (byte {exc.object[exc.start:exc.start + 1]!r} at position {exc.start}); "
            f"save it as UTF-8, e.g. `iconv -f latin1 -t utf-8 {path.name} > utf8.csv`"
        ) from exc
    except Exception as exc:  # pandas raises many kinds
        if path.stat().st_size == 0:
            raise TaskError(f"{what} file {path} is empty; it needs a header row and data rows") from exc
        raise TaskError(f"cannot read {what} file {path}: {exc}") from exc
    if len(df.columns) == 1 and path.suffix.lower() == ".csv":
        header = str(df.columns[0])
        for sep, name in ((";", "semicolons"), ("\t", "tabs"), ("|", "pipes")):
            if sep in header:
                raise TaskError(f"{what} file {path} is separated by {name}, not commas (its header is {header[:80]!r}); save it comma-separated")
    if len(df) == 0 and what != "sample submission":
        raise TaskError(f"{what} file {path} has a header but no rows")
    return df


def _text_ids(path: Path, id_column: str, frame):
    """The id column as written in the file (``00301`` stays ``00301``): re-read as text from a
    CSV; a JSON table's values as they are."""
    import pandas as pd

    if path.suffix.lower() == ".csv":
        return pd.read_csv(path, usecols=[id_column], dtype=str, keep_default_na=False)[id_column]
    return frame[id_column]


def _check_ids(ids, sample_ids, id_column: str, where: str) -> None:
    """The test ids must be present, unique and the same set as the sample submission's, both
    compared as written (:func:`_text_ids`: ``00301`` and ``301`` differ).

    Args:
        ids, sample_ids: The id column of the test file and of the sample submission.
    """
    missing = ids.isna() | (ids.astype(str).str.strip() == "")
    if missing.any():
        raise TaskError(f"{where}: id column {id_column!r} of the test file has {int(missing.sum())} missing values; every test row needs an id")
    if not ids.is_unique:
        dup = ids[ids.duplicated()].astype(str).unique()[:3]
        raise TaskError(f"{where}: id column {id_column!r} of the test file repeats ids ({', '.join(dup)} ...); ids must be unique")
    test_ids, sample_ids = set(ids.astype(str)), set(sample_ids.astype(str))
    if test_ids != sample_ids:
        only_sample = sorted(sample_ids - test_ids)[:3]
        only_test = sorted(test_ids - sample_ids)[:3]
        raise TaskError(
            f"{where}: the ids of sample_submission.csv and the test file differ (only in the sample: {only_sample}, "
            f"only in test: {only_test}); the sample submission must list exactly the test rows"
        )


def _infer_columns(train, test, sample, target, id_column, no_id_column, where: str):
    """Infer (target_columns, id_column, echo_columns, notes) from the sample submission,
    checking consistency; ``notes`` say what was inferred that a user should know."""
    sub_cols = list(sample.columns)
    notes: list[str] = []
    _check_name_case(train, test, sub_cols, where)
    id_column = _infer_id_column(train, test, sample, target, id_column, no_id_column, where)
    rest = [c for c in sub_cols if c != id_column]
    if target is None and id_column is None and not no_id_column and sub_cols[0] in test.columns:
        raise TaskError(
            f"{where}: the first column of sample_submission.csv, {sub_cols[0]!r}, is in the test file but "
            f"cannot be the id column (its values are not unique or it is not in the training file); "
            f"set `id_column:` or `no_id_column: true`, and `target:` in task.yaml"
        )
    if target is None:
        target = _infer_target(train, test, rest, id_column, notes, where)
    _check_targets(train, test, sample, target, rest, where)
    one_hot = len(target) == 1 and target[0] not in sample.columns
    predicted = (set(rest) - set(test.columns)) if one_hot else set(target)
    echo = [c for c in rest if c not in predicted]
    for c in echo:
        if c not in test.columns:
            raise TaskError(
                f"{where}: column {c!r} of sample_submission.csv is neither the id, a target, nor a column of "
                f"the test file; fix `target:` / `id_column:` in task.yaml"
            )
    return list(target), id_column, echo, notes


def _check_name_case(train, test, sub_cols, where: str) -> None:
    """Refuse a sample-submission column that matches a table's column only when case is
    ignored (`ID` against `id`): names are case-sensitive."""
    for c in sub_cols:  # `ID` in the sample, `id` in the test file: names are case-sensitive
        if c in test.columns or c in train.columns:
            continue
        same = [t for t in dict.fromkeys([*test.columns, *train.columns]) if str(t).lower() == str(c).lower()]
        if same:
            raise TaskError(
                f"{where}: column {c!r} of sample_submission.csv matches column {same[0]!r} of the "
                f"{'test' if same[0] in test.columns else 'training'} file only when case is ignored; column names are "
                f"case-sensitive: rename one of them so the two are spelled the same"
            )


def _infer_id_column(train, test, sample, target, id_column, no_id_column, where: str):
    """The id column: the one given (checked to be in the sample submission and the test file),
    else the sample submission's first column when it is unique and in both tables, else None."""
    sub_cols = list(sample.columns)
    inferred_id = None
    if not no_id_column:
        first = sub_cols[0]
        if first in test.columns and first in train.columns and sample[first].is_unique:
            inferred_id = first
        elif id_column is None and target is None and len(sub_cols) > 1 and first in train.columns and sample[first].is_unique:
            raise TaskError(
                f"{where}: the first column of sample_submission.csv, {first!r}, looks like the id (unique, and in the "
                f"training file) but the test file has no column {first!r} (columns: {list(test.columns)}); add it to "
                f"the test file, or, if the submission has no id, set `no_id_column: true` and `target:` in task.yaml"
            )
    if id_column is not None:
        if id_column not in sample.columns:
            raise TaskError(
                f"{where}: id_column {id_column!r} is not a column of sample_submission.csv "
                f"(columns: {sub_cols}); fix id_column or set no_id_column: true"
            )
        if id_column not in test.columns:
            raise TaskError(f"{where}: id_column {id_column!r} is not a column of the test file (columns: {list(test.columns)}); add it to the test file or fix id_column")
    else:
        id_column = inferred_id
    return id_column


def _infer_target(train, test, rest, id_column, notes: list[str], where: str) -> list[str]:
    """The target columns when task.yaml names none: the sample submission's other columns
    found in the training file, or the one training column the test file lacks whose values
    are the sample submission's probability columns (a note says so)."""
    target = [c for c in rest if c in train.columns]
    one_hot_inferred = False
    if not target:
        # one probability column per class (id,F,L,M,VF) and the labels in a training column
        # the test file lacks (class): that column is the target, as a Kaggle user reads it
        label_cols = [c for c in train.columns if c not in test.columns and c != id_column
                      and {str(v) for v in train[c].dropna().unique()} == {str(r) for r in rest}]
        if len(label_cols) == 1:
            target, one_hot_inferred = label_cols, True
            notes.append(f"target: {label_cols[0]!r} (the training column that the test file lacks, whose values "
                         f"{', '.join(map(repr, rest[:5]))}{' ...' if len(rest) > 5 else ''} are the sample submission's "
                         f"probability columns); set `target:` in task.yaml to choose another")
    if not target:
        raise TaskError(
            f"{where}: cannot infer the target column: no column of sample_submission.csv "
            f"other than the id ({rest}) is in the training file; add `target: COLUMN` to task.yaml"
        )
    if len(target) != len(rest) and not one_hot_inferred:
        missing = [c for c in rest if c not in train.columns]
        raise TaskError(
            f"{where}: sample_submission.csv columns {missing} are not in the training file; "
            f"add `target:` to task.yaml naming the training column(s) to predict"
        )
    return target


def _check_targets(train, test, sample, target, rest, where: str) -> None:
    """Each target is a training column, not a test column, predicted by the sample submission
    (or one-hot there), and has no missing values."""
    sub_cols = list(sample.columns)
    for t in target:
        if t not in train.columns:
            raise TaskError(
                f"{where}: target column {t!r} is not in the training file "
                f"(columns: {list(train.columns)}); fix `target:` in task.yaml"
            )
        if t in test.columns:
            raise TaskError(
                f"{where}: target column {t!r} is also in the test file; the test file must not hold labels"
            )
        one_hot = len(target) == 1 and set(rest) - set(test.columns) == {str(v) for v in train[t].dropna().unique()}
        if t not in sample.columns and not one_hot:
            raise TaskError(
                f"{where}: target column {t!r} is not a column of sample_submission.csv "
                f"(columns: {sub_cols}); the submission must predict the target"
            )
        if train[t].isna().any():
            n = int(train[t].isna().sum())
            raise TaskError(f"{where}: target column {t!r} has {n} missing values in the training file; drop those rows")


def _check_column_types(train, test, where: str, train_file: str, test_file: str) -> None:
    """A column that holds numbers in the training file must hold numbers (or blanks) in the
    test file: a model fitted on numbers cannot read text there.

    Raises:
        TaskError: naming the file, the column, a few of the values and the rows they are on.
    """
    import pandas as pd

    for c in train.columns:
        if c not in test.columns or not pd.api.types.is_numeric_dtype(train[c]) or pd.api.types.is_numeric_dtype(test[c]):
            continue
        bad = test[c].notna() & pd.to_numeric(test[c], errors="coerce").isna()
        if bad.any():
            rows = [int(i) + 2 for i in bad[bad].index[:3]]  # line numbers, counting the header
            values = test.loc[bad, c].astype(str).unique()[:3].tolist()
            raise TaskError(
                f"{where}: column {c!r} holds numbers in {train_file} but {int(bad.sum())} value(s) that are not numbers in "
                f"{test_file} ({', '.join(repr(v) for v in values)}; line(s) {', '.join(map(str, rows))}); fix those values, "
                f"or leave them blank if they are missing"
            )


def _check_metric_domain(train, target: list[str], metric, where: str, train_file: str) -> None:
    """Every target value must lie in the metric's domain (``rmsle``: above -1).

    Raises:
        TaskError: naming the column, how many values are outside, a few of them with their
            lines, and the fix.
    """
    import pandas as pd

    bound = metric.target_above
    if bound is None or metric.kind != "regression":
        return
    for c in target:
        y = pd.to_numeric(train[c], errors="coerce")
        bad = y <= bound
        if bad.any():
            lines = [int(i) + 2 for i in bad[bad].index[:3]]  # counting the header line
            values = ", ".join(f"{v:g}" for v in y[bad].head(3))
            raise TaskError(
                f"{where}: the metric {metric.name} takes log(1 + y), so every target value must be above {bound:g}, but "
                f"column {c!r} of {train_file} has {int(bad.sum())} value(s) at or below it ({values}; line(s) "
                f"{', '.join(map(str, lines))}); use a metric without that bound (rmse, mae), or fix those values"
            )


def _json_value(v: Any) -> Any:
    """Turn a numpy / pandas scalar into a plain JSON value."""
    if hasattr(v, "item"):
        v = v.item()
    return v


def _infer_kind(train, target_columns, metric_kind, where: str) -> tuple[str, list | None]:
    if len(target_columns) > 1:
        if metric_kind != "regression":
            # multi-label: several 0/1 label columns, each predicted as a probability
            bad = [c for c in target_columns if not set(train[c].dropna().astype(str).str.lower().unique()) <= {"0", "1", "true", "false", "0.0", "1.0"}]
            if bad:
                raise TaskError(
                    f"{where}: {len(target_columns)} target columns with a classification metric are read as "
                    f"multi-label (one 0/1 column per label), but {bad} hold other values; use one target column "
                    f"for a multi-class task"
                )
            return "multilabel", None
        return "multi_target_regression", None
    y = train[target_columns[0]]
    if metric_kind == "regression":
        import pandas as pd

        if not pd.api.types.is_numeric_dtype(y):
            raise TaskError(f"{where}: the metric is a regression metric but target {target_columns[0]!r} is not numeric ({(train[target_columns[0]].dropna().astype(str).head(1).tolist() or ['?'])[0]!r} ...); use a classification metric (accuracy, roc_auc, log_loss, f1) or a numeric target")
        values = y.dropna().unique()
        if len(values) == 1:
            raise TaskError(f"{where}: target {target_columns[0]!r} has the single value {_json_value(values[0])!r} in every row; nothing to "
                            f"learn: the training file needs rows with different target values")
        return "regression", None
    labels = sorted(y.unique().tolist(), key=lambda v: (str(type(v)), v))
    if len(labels) < 2:
        raise TaskError(f"{where}: target {target_columns[0]!r} has a single class {labels}; nothing to learn: the training file needs rows of at least two classes")
    labels = [_json_value(v) for v in labels]
    return ("binary" if len(labels) == 2 else "multiclass"), labels


def _default_positive(labels: list) -> Any:
    """The positive class of a binary task: True, 1, or else the larger sorted label."""
    if all(isinstance(v, bool) for v in labels):
        return True
    if set(labels) == {0, 1}:  # ints (or floats) 0 and 1
        return labels[-1]
    lowered = {str(v).lower(): v for v in labels}
    for word in ("yes", "true", "positive"):
        if word in lowered:
            return lowered[word]
    return labels[-1]


def _build_spec(
    *,
    name: str,
    data_dir: Path,
    cfg: _TaskYaml,
    description: str,
    where: str,
) -> TaskSpec:
    try:
        metric = get_metric(cfg.metric)
    except UnknownMetricError as exc:
        raise TaskError(f"{where}: metric: {exc}") from exc
    train = _read_table(data_dir / cfg.train_file, "training")
    sample = _read_table(data_dir / cfg.sample_submission_file, "sample submission")
    test_file, test, notes = _test_table(data_dir, cfg, train, sample, where)
    if len(sample) != len(test):
        raise TaskError(
            f"{where}: sample_submission.csv has {len(sample)} rows but the test file has {len(test)}; "
            f"they must describe the same rows"
        )
    target, id_column, echo, inferred = _infer_columns(train, test, sample, cfg.target, cfg.id_column, cfg.no_id_column, where)
    notes = [*notes, *inferred]
    if id_column is not None:
        _check_ids(_text_ids(data_dir / test_file, id_column, test), _text_ids(data_dir / cfg.sample_submission_file, id_column, sample),
                   id_column, where)
    kind, labels = _infer_kind(train, target, metric.kind, where)
    _check_metric_domain(train, target, metric, where, cfg.train_file)
    _check_column_types(train, test, where, cfg.train_file, test_file)
    positive = None
    if kind == "binary":
        positive = cfg.positive_class if cfg.positive_class is not None else _default_positive(labels)
        if positive not in labels:
            raise TaskError(f"{where}: positive_class {positive!r} is not one of the labels {labels}")
    _check_submission_shape(sample, target, kind, labels, positive, id_column, metric, where)
    if metric.kind == "regression":
        sub_format = "value"
    elif metric.needs_proba:
        sub_format = "probability"
    else:
        sub_format = "label"
    media, extra = _media_files(data_dir, cfg, train, test, test_file, where, notes)
    graph = None
    if cfg.graph is not None:
        try:
            graph = check_graph(data_dir, cfg.graph, id_column, train, test, where)
        except GraphError as exc:
            raise TaskError(str(exc)) from None
        extra = sorted(set(extra) | set(graph.files()))
    validation = cfg.validation
    if media is not None and validation.kind is None:  # one network per candidate, not k: a holdout
        validation = validation.model_copy(update={"kind": "holdout"})
    val = _validation_plan(validation, train, target, kind, metric, where, cfg.train_file, test_columns=list(test.columns))
    return TaskSpec(
        name=name,
        data_dir=data_dir.resolve(),
        train_file=cfg.train_file,
        test_file=test_file,
        sample_submission_file=cfg.sample_submission_file,
        description=description,
        target_columns=target,
        id_column=id_column,
        submission_columns=list(sample.columns),
        metric=metric.name,
        higher_is_better=metric.higher_is_better,
        task_kind=kind,
        class_labels=labels,
        positive_class=_json_value(positive) if positive is not None else None,
        submission_format=sub_format,
        echo_columns=echo,
        extra_files=extra,
        media=media,
        graph=graph,
        validation=val,
        constraints=cfg.constraints,
        n_train=len(train),
        n_test=len(test),
        notes=notes,
    )


def _build_forecast_spec(*, name: str, data_dir: Path, cfg: _TaskYaml, description: str, where: str) -> TaskSpec:
    """A forecasting task's :class:`TaskSpec` (:mod:`mcgs.forecast`): the history's series and
    borders checked, the metric a regression one."""
    try:
        metric = get_metric(cfg.metric)
    except UnknownMetricError as exc:
        raise TaskError(f"{where}: metric: {exc}") from exc
    if metric.kind != "regression":
        raise TaskError(f"{where}: a forecast is scored with a regression metric (mse, mae, rmse), not {metric.name}")
    try:
        fc, notes = check_forecast(data_dir, cfg.forecast, where)
    except ForecastError as exc:
        raise TaskError(str(exc)) from None
    return TaskSpec(
        name=name, data_dir=data_dir.resolve(), train_file=fc.file, test_file=fc.file, sample_submission_file=fc.file,
        description=description, target_columns=fc.targets, id_column=None, submission_columns=[fc.time, *fc.targets],
        metric=metric.name, higher_is_better=metric.higher_is_better, task_kind="forecast", submission_format="value",
        extra_files=[], forecast=fc, validation=ValidationScheme(kind="holdout", time_column=fc.time),
        constraints=cfg.constraints, n_train=fc.train_end, n_test=len(fc.test_origins()), notes=notes,
    )


def _test_table(data_dir: Path, cfg: "_TaskYaml", train, sample, where: str):
    """``(test_file, test table, notes)``: the task's test table, or, for an image task without
    one, the sample submission's id column (:func:`_test_table_from_sample`)."""
    test_file = cfg.test_file
    if test_file != cfg.sample_submission_file and not (data_dir / test_file).exists() and "test_file" not in cfg.model_fields_set:
        test_file = _test_table_from_sample(data_dir, train, sample, cfg, where)
    if test_file == cfg.sample_submission_file:  # the test rows are the sample submission's ids
        note = f"test rows: the ids of {cfg.sample_submission_file} (the task has no test table)"
        return test_file, sample[[cfg.id_column or sample.columns[0]]], [note]
    return test_file, _read_table(data_dir / test_file, "test"), []


def _media_files(data_dir: Path, cfg: "_TaskYaml", train, test, test_file: str, where: str, notes: list[str]):
    """``(media, extra_files)``: an image task's files, found and every one opened
    (:mod:`mcgs.media`), or None (a column of file names whose files are not here is noted and
    read as a table column); and the task's extra inputs, with the folders or zips of files.

    Raises:
        TaskError: files missing, unreadable or not found; ``files:`` set on a table task.
    """
    tables = (cfg.train_file, test_file, cfg.sample_submission_file, "description.md")
    try:
        media = detect_media(data_dir, train, test, declared=cfg.files.model_dump() if cfg.files else None, tables=tables, where=where)
        if media is not None:
            media = check_media(data_dir, media, train[media.column].astype(str).tolist(), test[media.column].astype(str).tolist(), where=where)
    except MediaError as exc:
        raise TaskError(str(exc)) from None
    if cfg.files is not None and media is None:
        raise TaskError(f"{where}: files: is set but no column of both tables names image files; set files.column to that column")
    named = image_column(train, test, None) if media is None else None
    if named is not None and test_file == cfg.sample_submission_file:
        raise TaskError(f"{where}: there is no test table, and the images that {cfg.sample_submission_file}'s column {named!r} names "
                        f"(e.g. {test[named].iloc[0]!r}) are in no folder or zip beside the tables; add them (test/ or test.zip)")
    if named is not None:
        notes.append(f"column {named!r} names image files (e.g. {train[named].iloc[0]!r}) but no folder or zip beside the tables holds "
                     f"them: it is read as a table column; put the files in images/ (or set files: in task.yaml) for an image task")
    extra = _extra_files(data_dir, cfg, where)
    if media is not None:
        extra = sorted(set(extra) | {p for p in media.sources() if p != "."} | _top_folders(test, train, media))
    return media, extra


def _test_table_from_sample(data_dir: Path, train, sample, cfg: "_TaskYaml", where: str) -> str:
    """The sample submission as the test table, for a task without one whose sample submission's
    id column names image files (MLE-bench's image competitions: ``train.csv``,
    ``sample_submission.csv``, ``train.zip``, ``test.zip``).

    Raises:
        TaskError: the test file is missing and the task is not such an image task.
    """
    from mcgs.media import is_image_name

    first = cfg.id_column or sample.columns[0]
    head = sample[first].head(50).tolist() if first in sample.columns else []
    if first in train.columns and head and all(is_image_name(v) for v in head):
        return cfg.sample_submission_file
    raise TaskError(f"test file {data_dir / cfg.test_file} does not exist; add it or set its name in task.yaml")


def _top_folders(test, train, media) -> set[str]:
    """For files named by paths from the task folder (source ``.``), the folders they lie in."""
    found: set[str] = set()
    for frame, source in ((train, media.train), (test, media.test)):
        if source.path == ".":
            found |= {v.split("/", 1)[0] for v in frame[media.column].astype(str) if "/" in v}
    return found


def _check_submission_shape(sample, target, kind: str, labels, positive, id_column, metric, where: str) -> None:
    """The sample submission fits the task: one probability column per class only for a
    multi-class probability metric, one column for a binary task, and a probability metric for
    a multi-label task.

    Raises:
        TaskError: naming the mismatch and the fix.
    """
    one_hot = target[0] not in sample.columns  # one probability column per class
    if one_hot and kind == "binary" and metric.needs_proba:
        raise TaskError(
            f"{where}: sample_submission.csv has one probability column per class of the two classes of {target[0]!r}; "
            f"a binary task's submission holds one column, {target[0]!r}, with the probability of {positive!r}: write "
            f"the sample submission that way"
        )
    if one_hot and not (kind == "multiclass" and metric.needs_proba):
        raise TaskError(
            f"{where}: sample_submission.csv has one column per class of {target[0]!r}; that needs a multi-class "
            f"probability metric such as log_loss, not {metric.name}"
        )
    if not one_hot and kind == "multiclass" and metric.needs_proba:
        raise TaskError(
            f"{where}: sample_submission.csv has a single column {target[0]!r} for the {len(labels)} classes of "
            f"{target[0]!r} (a label per row), but {metric.name} scores class probabilities; use a label metric "
            f"(accuracy, f1_macro), or a sample submission with one probability column per class "
            f"({', '.join(map(str, [id_column or 'id', *labels[:3]]))}{', ...' if len(labels) > 3 else ''})"
        )
    if kind == "multilabel" and not metric.needs_proba:
        raise TaskError(f"{where}: a multi-label task needs a probability metric such as mean_column_roc_auc, not {metric.name}")


#: Folds by training rows when task.yaml leaves ``n_splits`` out: (fewer rows than, folds); more
#: rows than the last bound get 3. A fold's fit costs about (k-1)/k of the rows, so 5 folds cost
#: 4 fits on all rows, 3 folds 2, a holdout 0.8: on large data the estimate is precise with
#: fewer folds and the search gets several times more candidates (issue 33).
FOLDS_BY_ROWS = ((50_000, 5),)
#: From this many training rows, a task whose validation kind is left out is validated on a
#: holdout of 1/n_splits of the rows (stratified for classification) instead of k folds.
HOLDOUT_ROWS = 200_000


def default_n_splits(n_rows: int) -> int:
    """Folds for a training table of ``n_rows`` rows when task.yaml does not say (:data:`FOLDS_BY_ROWS`)."""
    return next((k for bound, k in FOLDS_BY_ROWS if n_rows < bound), 3)


def _validation_plan(val, train, target, kind: str, metric, where: str, train_file: str, test_columns: list[str] = ()):
    """task.yaml's ``validation`` with its kind filled in (stratified k-fold for classification,
    else k-fold), checked against the training table: the group or time column exists, a group
    k-fold has a group per fold, there are enough rows, and for stratified folds every class has
    at least ``n_splits`` rows.

    Raises:
        TaskError: naming the setting, the column or class, and the fix.
    """
    if val.kind is None:
        plain = "kfold" if metric.kind == "regression" or kind == "multilabel" else "stratified_kfold"
        holdout = len(train) >= HOLDOUT_ROWS and kind != "multilabel"
        val = val.model_copy(update={"kind": "holdout" if holdout else plain, "n_splits": val.n_splits or (5 if holdout else None)})
    if val.kind == "predefined":
        if val.fold_column in test_columns:
            raise TaskError(f"{where}: validation.fold_column {val.fold_column!r} is also a column of the test table, where it "
                            f"would be read as a feature; keep the folds in the training table only")
        return _predefined_plan(val, train, target, kind, where, train_file)
    if val.n_splits is None:
        val = val.model_copy(update={"n_splits": default_n_splits(len(train)) if val.kind in ("kfold", "stratified_kfold") else 5})
    for split, key in (("group_kfold", "group_column"), ("time_split", "time_column")):
        column = getattr(val, key)
        if val.kind == split and (not column or column not in train.columns):
            got = f" ({column!r} is not one)" if column else ""
            raise TaskError(f"{where}: validation.kind {split} needs validation.{key} naming a training column{got}; columns: {list(train.columns)}")
    if val.kind == "holdout" and kind == "multilabel":
        raise TaskError(f"{where}: validation.kind holdout is not available for multi-label tasks; use validation: {{kind: kfold}}")
    if val.kind == "stratified_kfold" and kind not in ("binary", "multiclass"):
        raise TaskError(f"{where}: validation.kind stratified_kfold keeps each class's share in every fold, but this is a "
                        f"{kind.replace('_', ' ')} task; use validation: {{kind: kfold}} (or leave kind out)")
    if val.kind == "time_split":
        _check_time_column(train, val, where, train_file)
    if val.kind == "group_kfold":
        groups = train[val.group_column].nunique(dropna=False)
        if groups < val.n_splits:
            raise TaskError(
                f"{where}: validation.group_column {val.group_column!r} has {groups} distinct group(s), fewer than "
                f"validation.n_splits={val.n_splits}: each fold needs a group of its own; set validation: "
                f"{{n_splits: {max(2, groups)}}} in task.yaml" + (" or choose a column with more groups" if groups < 2 else "")
            )
    if len(train) < val.n_splits:
        raise TaskError(f"{where}: the training file has {len(train)} rows, fewer than validation.n_splits={val.n_splits}; "
                        f"set validation: {{n_splits: {max(2, len(train))}}} in task.yaml")
    if kind in ("binary", "multiclass") and val.kind in ("stratified_kfold", "holdout"):
        counts = train[target[0]].value_counts()
        smallest = int(counts.min())
        if smallest < 2:
            lone = [str(c) for c in counts[counts < 2].index[:5]]
            raise TaskError(
                f"{where}: {int((counts < 2).sum())} class(es) of {target[0]!r} have a single training row (e.g. {lone}); "
                f"cross-validation needs at least 2 rows per class: merge rare classes or drop their rows"
            )
        if smallest < val.n_splits:
            raise TaskError(
                f"{where}: the rarest class of {target[0]!r} has {smallest} rows, fewer than "
                f"validation.n_splits={val.n_splits}; set validation: {{n_splits: {smallest}}} in task.yaml"
            )
    return val


def _predefined_plan(val, train, target, kind: str, where: str, train_file: str):
    """A ``predefined`` validation checked: its fold column holds integers >= -1 with at least one
    validated fold (>= 0), and each validated fold leaves training rows of at least two
    classes (classification); ``n_splits`` is set to the number of validated folds.

    Raises:
        TaskError: naming the column, the offending values and the fix.
    """
    import pandas as pd

    column = val.fold_column
    if not column or column not in train.columns:
        got = f" ({column!r} is not one)" if column else ""
        raise TaskError(f"{where}: validation.kind predefined needs validation.fold_column naming a column of {train_file} "
                        f"that gives each row's fold (-1: only trains; 0, 1, ...: validated){got}; columns: {list(train.columns)[:20]}")
    folds = pd.to_numeric(train[column], errors="coerce")
    bad = train[column][folds.isna() | (folds != folds.round()) | (folds < -1)]
    if len(bad):
        raise TaskError(f"{where}: validation.fold_column {column!r} of {train_file} must hold integers >= -1 (-1: only trains; "
                        f"0, 1, ...: validated folds); {len(bad)} row(s) hold e.g. {bad.astype(str).head(3).tolist()}")
    validated = sorted(int(k) for k in folds.unique() if k >= 0)
    if not validated:
        raise TaskError(f"{where}: validation.fold_column {column!r} of {train_file} has no validated row (fold 0 or above); "
                        f"mark the rows to validate on with 0")
    if kind in ("binary", "multiclass"):
        for k in validated:
            fit_classes = train.loc[(folds != k).to_numpy(), target[0]].nunique()
            if fit_classes < 2:
                raise TaskError(f"{where}: validated fold {k} of {column!r} leaves training rows of a single class of {target[0]!r}; "
                                f"each fold needs rows of at least two classes outside it")
    return val.model_copy(update={"n_splits": max(2, len(validated))})


def _extra_files(data_dir: Path, cfg: _TaskYaml, where: str) -> list[str]:
    """The task's extra input files or folders: as declared in task.yaml (``extra_files``), or
    every other entry of an MLE-bench public folder (which holds only public files)."""
    if cfg.extra_files == ["*"]:
        known = {cfg.train_file, cfg.test_file, cfg.sample_submission_file, "description.md"}
        return sorted(p.name for p in data_dir.iterdir() if p.name not in known and not p.name.startswith("."))
    for name in cfg.extra_files:
        inside = not Path(name).is_absolute() and name.strip("/") not in ("", ".", "..") and "/" not in name.strip("/")
        if not inside or name.startswith(".") or not (data_dir / name).exists():
            raise TaskError(f"{where}: extra_files entry {name!r} is not a file or folder directly inside {data_dir}; "
                            f"name it relative to the task folder (e.g. images/), and move it there if it lies elsewhere")
    return [n.strip("/") for n in cfg.extra_files]


def _load_yaml(path: Path) -> dict:
    try:
        data = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as exc:
        raise TaskError(f"{path} is not valid YAML: {exc}") from exc
    if not isinstance(data, dict):
        raise TaskError(f"{path} must be a mapping of settings (got {type(data).__name__})")
    return data


def _parse_task_yaml(data: dict, where: Path) -> _TaskYaml:
    try:
        return _TaskYaml.model_validate(data)
    except ValidationError as exc:
        from mcgs._validation import describe_validation_error

        raise TaskError(f"{where} has invalid settings:\n" + describe_validation_error(exc, example="e.g. metric: accuracy")) from exc


def load_task(path: str | Path) -> TaskSpec:
    """Load a task from a plain folder (``task.yaml``) or an MLE-bench competition folder.

    Args:
        path: The task folder.

    Returns:
        The frozen :class:`TaskSpec`.

    Raises:
        TaskError: the folder, a file, a column or a setting is missing or contradictory; the
            message says which and how to fix it.
    """
    root = Path(path)
    if root.is_file():
        raise TaskError(f"{root} is a file; give the task folder that holds it ({root.parent})")
    if not root.is_dir():
        raise TaskError(f"task folder {root} does not exist; give the folder that holds task.yaml and the tables")
    if (root / "task.yaml").is_file():
        cfg = _parse_task_yaml(_load_yaml(root / "task.yaml"), root / "task.yaml")
        desc = cfg.description or ""
        for cand in ("description.md", "description.txt"):
            if not desc and (root / cand).is_file():
                desc = (root / cand).read_text(errors="replace")
        build = _build_forecast_spec if cfg.forecast is not None else _build_spec
        return build(name=cfg.name or root.resolve().name, data_dir=root, cfg=cfg, description=desc, where=str(root / "task.yaml"))
    if (root / "config.yaml").is_file() and (root / "prepared" / "public").is_dir():
        conf = _load_yaml(root / "config.yaml")
        metric = conf.get("metric") or (conf.get("grader") or {}).get("name")
        if not metric:
            raise TaskError(f"{root / 'config.yaml'}: no `metric` and no `grader.name`; add `metric: <name>`")
        data = {"metric": metric}
        for key in ("target", "id_column", "no_id_column", "positive_class", "validation", "train_file", "test_file", "sample_submission_file"):
            if conf.get(key) is not None:
                data[key] = conf[key]
        data["extra_files"] = ["*"]  # a prepared public folder holds only public files
        cfg = _parse_task_yaml(data, root / "config.yaml")
        public = root / "prepared" / "public"
        desc = (public / "description.md").read_text(errors="replace") if (public / "description.md").is_file() else ""
        return _build_spec(name=str(conf.get("id") or root.name), data_dir=public, cfg=cfg, description=desc, where=str(root / "config.yaml"))
    hint = ""
    if (root / "train.csv").is_file():
        hint = " It has train.csv: add a task.yaml with at least `metric: <name>` (e.g. accuracy, roc_auc, rmse)."
    raise TaskError(
        f"{root} is not a task folder: it has no task.yaml (nor is it an MLE-bench folder made by `mcgs mlebench prepare`).{hint}"
    )


def data_fingerprint(spec: TaskSpec) -> str:
    """SHA-256 over the task's public files (train, test, sample submission), in that order.

    Returns:
        A hex digest; two runs on byte-identical data share it.
    """
    h = hashlib.sha256()
    for p in (spec.train_path, spec.test_path, spec.sample_submission_path):
        h.update(p.name.encode())
        with open(p, "rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                h.update(chunk)
    return h.hexdigest()


def task_json_payload(spec: TaskSpec) -> dict:
    """Helper used by the contract: JSON-able summary of the spec (no paths)."""
    return json.loads(spec.model_dump_json(exclude={"data_dir"}))
