"""Request -> task spec: the AutoML-Agent front end, offline.

A person writes what they want ("predict whether a passenger was transported; accuracy;
the model must be interpretable") and points at a data folder. This module turns the request
into a :class:`TaskRequest` (a JSON schema; the LLM path fills the same schema by structured
output), checks it against the data (**request verification**: every missing or contradictory
fact is reported with what to add, before any search starts), and writes a task folder that
:func:`mcgs.task.load_task` reads like any other.

With a language model (:class:`RequestReader`), the model first reads the request into the
same fields by structured output (a forced tool call validated by :class:`RequestReading`);
what it read fills the facts the rules did not find (a metric or target named in words the
rules miss, constraints), and every fact then goes through the same checks against the data,
so the model never decides a fact the data contradicts.

The offline parser is rule based. It reads, in order of trust: the request, the sample
submission (its columns name the id and the target), the column names of the tables, and the
task description (``description.md``, ``overview.txt``: its metric words). After AutoML-Agent
(Trirat et al., ICML 2025, §3.1 "request parsing" and §3.4 "request verification"), without its
LLM.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict

from mcgs.profile import is_datetime_column, normalise_name
from mcgs.task import TaskConstraints as RequestConstraints

__all__ = [
    "RequestConstraints",
    "TaskRequest",
    "RequestProblem",
    "ParsedRequest",
    "RequestError",
    "parse_request",
    "RequestReading",
    "RequestReader",
    "write_task_folder",
    "task_from_request",
]

TABLE_SUFFIXES = (".csv", ".json", ".jsonl")
DESCRIPTION_FILES = ("description.md", "description.txt", "overview.txt", "overview.md", "README.md")


class RequestError(ValueError):
    """The request cannot become a task; ``problems`` lists each missing or contradictory fact."""

    def __init__(self, problems: list["RequestProblem"]):
        self.problems = problems
        lines = "\n".join(f"  - {p}" for p in problems)
        super().__init__(f"the request cannot start a search yet:\n{lines}")


class TaskRequest(BaseModel):
    """The JSON schema a request is parsed into (``TaskRequest.model_json_schema()``).

    Every field is optional in the schema; :func:`parse_request` fills what the request and the
    data say and reports what is still missing.
    """

    model_config = ConfigDict(extra="forbid")
    task_kind: Literal["binary", "multiclass", "multilabel", "regression", "multi_target_regression", "forecast"] | None = None
    target: list[str] | None = None
    id_column: str | None = None
    metric: str | None = None
    time_column: str | None = None
    train_file: str | None = None
    test_file: str | None = None
    sample_submission_file: str | None = None
    graph_edges: str | None = None
    graph_nodes: str | None = None
    fold_column: str | None = None
    constraints: RequestConstraints = RequestConstraints()


class RequestReading(BaseModel):
    """What a language model read in a request (the ``task_spec`` tool input)."""

    model_config = ConfigDict(extra="ignore")
    metric: str | None = None
    target: list[str] | None = None
    id_column: str | None = None
    time_column: str | None = None
    interpretable: bool | None = None
    max_inference_ms_per_row: float | None = None
    max_model_mb: float | None = None
    problems: list[str] = []


class RequestReader:
    """Reads a request with a language model (``request.j2``; one structured call).

    Args:
        settings: :class:`~mcgs.settings.LLMSettings` (the cheap model reads).
        client: An :class:`~mcgs.llm.AnthropicClient` or :class:`~mcgs.llm.OpenAIClient`
            (default: the provider's, built from the settings).
        provider: ``anthropic`` or ``openai``.

    ``usage`` holds what the call was billed, for the run's cost ledger.
    """

    def __init__(self, settings, client=None, provider: str = "anthropic"):
        self.settings = settings
        self.provider = provider
        self._client = client
        self.usage = None

    def read(self, prompt: str, files: list[str], train_cols: list[str], test_cols: list[str], sample_cols: list[str] | None) -> RequestReading:
        """The model's reading. Raises :class:`mcgs.llm.LLMError` when the call fails."""
        from mcgs.coders.anthropic import prompt_environment
        from mcgs.llm import LLMError, make_client

        client = self._client or make_client(self.provider, self.settings)
        user = prompt_environment().get_template("request.j2").render(
            prompt=prompt, files=files, train_columns=train_cols, test_columns=test_cols, sample_columns=sample_cols or []
        )
        system = (
            "You turn a person's machine-learning request into a task specification. Metric names: accuracy, roc_auc, "
            "log_loss, f1, f1_macro, f1_micro, rmse, rmsle, mae, mean_column_roc_auc, mean_column_rmsle."
        )
        try:
            reading, self.usage = client.ask(
                model=self.settings.cheap_model, system=system, user=user, answer=RequestReading, tool_name="task_spec",
                tool_description="The task specification the request asks for.", max_tokens=1024,
            )
        except LLMError as exc:
            self.usage = exc.usage
            raise
        return reading


@dataclass(frozen=True)
class RequestProblem:
    """One fact the request lacks or contradicts, and how to fix it."""

    field: str
    message: str
    fix: str

    def __str__(self) -> str:
        return f"{self.field}: {self.message} -- {self.fix}"


@dataclass
class ParsedRequest:
    """What :func:`parse_request` found.

    Attributes:
        request: The filled schema.
        problems: Missing or contradictory facts; empty when the task can start.
        notes: Where each fact came from (shown to the user).
        description: The task description text found in the data folder (or the prompt).
        forecast: For a forecast request, task.yaml's ``forecast`` entry
            (:mod:`mcgs.forecast_request`); None otherwise.
    """

    request: TaskRequest
    problems: list[RequestProblem] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    description: str = ""
    forecast: dict | None = None

    @property
    def ok(self) -> bool:
        return not self.problems


# --------------------------------------------------------------------------------------------
# metric words

# (pattern, canonical metric). Earlier patterns win and consume their text, so "mean
# column-wise ROC AUC" is not also read as "ROC AUC", nor "RMSE of the log" as "RMSE".
_METRIC_PATTERNS: tuple[tuple[str, str], ...] = (
    (r"mean column[- ]wise (?:roc[- ])?auc|(?:average|mean) (?:of (?:the )?)?(?:individual |per[- ]\w+ )?(?:roc[- ])?aucs?\b|auc is calculated for each", "mean_column_roc_auc"),
    (r"mean column[- ]wise (?:rmsle|root mean squared log\w* error)", "mean_column_rmsle"),
    (r"\brmsle\b|root[- ]mean[- ]squared[- ]log\w*[- ]error|(?:rmse|root[- ]mean[- ]squared[- ]error)\W*(?:\(rmse\))?[^.]{0,40}?\blog(?:arithm)?s?\b", "rmsle"),
    (r"\bmulti[- ]?class log[- ]?loss\b|\blog[- ]?loss\b|\blogarithmic loss\b|\bcross[- ]entropy\b", "log_loss"),
    (r"\brmse\b|root[- ]mean[- ]squared[- ]error", "rmse"),
    (r"\bmae\b|mean absolute error", "mae"),
    (r"\bmacro[- ]f1\b|\bf1[- ]macro\b|macro[- ]averaged f1", "f1_macro"),
    (r"\bmicro[- ]f1\b|\bf1[- ]micro\b|micro[- ]averaged f1", "f1_micro"),
    (r"\bf1(?:[- ]score)?\b", "f1"),
    (r"\broc[- ]auc\b|\bauc\b|area under the (?:roc )?curve", "roc_auc"),
    (r"\baccuracy\b|\bclassification accuracy\b", "accuracy"),
)


def find_metrics(text: str) -> list[str]:
    """Canonical metric names mentioned in ``text``, in order of first mention, no repeats."""
    found: list[tuple[int, str]] = []
    low = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text.lower())  # markdown links -> their text
    for pattern, name in _METRIC_PATTERNS:
        for m in re.finditer(pattern, low):
            found.append((m.start(), name))
            low = low[: m.start()] + " " * (m.end() - m.start()) + low[m.end():]
    out: list[str] = []
    for _, name in sorted(found):
        if name not in out:
            out.append(name)
    return out


def _evaluation_section(description: str) -> str:
    """The part of a Kaggle-style description that defines the metric (its Evaluation or Metric
    section), or the whole text when it has no such heading."""
    m = re.search(r"^#+\s*(evaluation|metric)\b.*?$(.*?)(?=^#+\s*(submission|timeline|prizes|citation|dataset)|\Z)", description, re.I | re.M | re.S)
    return m.group(2) if m else description


# --------------------------------------------------------------------------------------------
# constraints and intent words

_TIME_WORDS = r"\b(hourly|daily|weekly|monthly|forecast\w*|time[- ]series|over time|time[- ]based|time[- ]indexed|chronological\w*|future)\b"
_REGRESSION_WORDS = r"\b(regression|how many|how much|amount|price|count|number of)\b"
_CLASSIFICATION_WORDS = r"\b(classif\w*|whether|which class|which category|yes or no|probability that)\b"


def _constraints(prompt: str) -> RequestConstraints:
    low = prompt.lower()
    ms = re.search(r"(\d+(?:\.\d+)?)\s*(ms|milliseconds?|s|seconds?)\s*(?:per|a|/|each)\s*(?:row|prediction|sample|example)", low)
    mb = re.search(r"(\d+(?:\.\d+)?)\s*(kb|mb|gb|megabytes?|gigabytes?)\b", low)
    latency = None
    if ms:
        latency = float(ms.group(1)) * (1.0 if ms.group(2).startswith("m") else 1000.0)
    size = None
    if mb and re.search(r"model|size|memory|disk|file", low[max(0, mb.start() - 40): mb.end() + 40]):
        unit = mb.group(2)
        size = float(mb.group(1)) * (1 / 1024 if unit == "kb" else 1024 if unit.startswith("g") else 1.0)
    interp = bool(re.search(r"\b(interpretab\w*|explainab\w*|explain\w* (?:to|its)|transparent model|white[- ]box)\b", low))
    return RequestConstraints(max_inference_ms_per_row=latency, max_model_mb=size, interpretable=interp)


# --------------------------------------------------------------------------------------------
# files and columns


def _find_file(data_dir: Path, stem: str) -> str | None:
    for suffix in TABLE_SUFFIXES:
        if (data_dir / f"{stem}{suffix}").is_file():
            return f"{stem}{suffix}"
    return None


#: Names of an edge list in a data folder (a graph task) and of the table of a graph's other nodes.
EDGE_FILES = ("edges", "links", "cites", "edge_list")
NODE_FILES = ("nodes",)
#: Names of a training column holding a published split (folds, -1 for rows that only train).
FOLD_COLUMNS = ("fold", "split_fold", "cv_fold")


def _graph_files(data_dir: Path, req: TaskRequest, out: "ParsedRequest") -> None:
    """A graph task's files, when the folder holds an edge list (``edges.csv``, ``links.csv``,
    ``cites.csv``): the request's ``graph_edges`` and ``graph_nodes``, with a note."""
    req.graph_edges = next((f for f in (_find_file(data_dir, stem) for stem in EDGE_FILES) if f and f.endswith(".csv")), None)
    if req.graph_edges:
        req.graph_nodes = next((f for f in (_find_file(data_dir, stem) for stem in NODE_FILES) if f and f.endswith(".csv")), None)
        out.notes.append(f"graph task: the rows are nodes of the graph in {req.graph_edges}"
                         + (f", with its other nodes in {req.graph_nodes}" if req.graph_nodes else ""))


def _fold_column(req: TaskRequest, out: "ParsedRequest", train_table, label_candidates: list[str]) -> None:
    """A published split: a training-only column named like a fold whose values are integers
    >= -1 with a 0 among them becomes the validation (``predefined``) and is no label."""
    import pandas as pd

    for c in label_candidates:
        if c.lower() not in FOLD_COLUMNS:
            continue
        values = train_table[c].dropna()
        whole = pd.api.types.is_numeric_dtype(values) and bool((values == values.round()).all())
        if len(values) == len(train_table) and whole and values.min() >= -1 and (values == 0).any():
            req.fold_column = c
            label_candidates.remove(c)
            out.notes.append(f"validation: the training table's own split in {c!r} (-1 only trains, 0 and up are validated)")
            return


def _names_image_files(data_dir: Path, sample_file: str | None) -> bool:
    """Whether the sample submission's first column names image files (``0004be2c.jpg``)."""
    import pandas as pd

    from mcgs.media import is_image_name

    if sample_file is None or not sample_file.endswith(".csv"):
        return False
    try:
        head = pd.read_csv(data_dir / sample_file, nrows=20, dtype=str).iloc[:, 0]
    except Exception:  # unreadable: the usual checks report it
        return False
    return len(head) > 0 and all(is_image_name(v) for v in head)


def _header(path: Path) -> list[str]:
    """Column names of a table without reading it all."""
    import pandas as pd

    from mcgs.task import read_table

    if path.suffix.lower() == ".csv":
        cols = list(pd.read_csv(path, nrows=5).columns)
        if len(cols) == 1:
            for sep, name in ((";", "semicolons"), ("\t", "tabs"), ("|", "pipes")):
                if sep in str(cols[0]):
                    raise ValueError(f"{path.name} is separated by {name}, not commas")
        return cols
    return list(read_table(path).columns)


def _mentioned_columns(prompt: str, columns: list[str]) -> list[str]:
    """Columns named in the prompt (case, spaces, dashes and underscores ignored; whole words
    only), in order of first mention."""
    low = prompt.lower()
    hits: list[tuple[int, str]] = []
    for c in columns:
        pat = r"(?<![A-Za-z0-9_])" + r"[ _-]?".join(re.escape(p) for p in re.split(r"[ _-]+", c.lower()) if p) + r"(?![A-Za-z0-9_])"
        m = re.search(pat, low)
        if m:
            hits.append((m.start(), c))
    return [c for _, c in sorted(hits)]


def _target_phrase(prompt: str) -> str | None:
    """The word(s) right after "predict"/"target"/"label" in the prompt, if any."""
    m = re.search(r"\b(?:predict(?:ing)?|forecast(?:ing)?|estimat(?:e|ing)|target(?: column)?(?: is)?|label(?: column)? is)\s+(?:the\s+|a\s+|an\s+|whether\s+(?:a|an|the)?\s*)?[`'\"]?([A-Za-z][A-Za-z0-9_]*)", prompt, re.I)
    return m.group(1) if m else None


# --------------------------------------------------------------------------------------------
# the parser


def parse_request(prompt: str, data_dir: str | Path, *, reader: RequestReader | None = None) -> ParsedRequest:
    """Turn a request and a data folder into a :class:`TaskRequest`, and verify it.

    Args:
        prompt: The person's request, free text.
        data_dir: Folder with the training and test tables (``train.csv``/``.json``,
            ``test.csv``/``.json``) and optionally ``sample_submission.csv`` and a description;
            or, for a forecast ("forecast the next 96 hours of OT"), one history
            (:mod:`mcgs.forecast_request`).
        reader: A language-model reader; what it reads fills facts the rules miss, and is
            checked against the data like the rest. When its call fails, the rules alone run.

    Returns:
        A :class:`ParsedRequest`; ``problems`` is empty when a search can start.
    """
    from mcgs.task import read_table

    data_dir = Path(data_dir)
    req = TaskRequest(constraints=_constraints(prompt))
    out = ParsedRequest(request=req)
    problems, notes = out.problems, out.notes
    if not data_dir.is_dir():
        problems.append(RequestProblem("data", f"{data_dir} is not a folder", "pass --data FOLDER holding train.csv and test.csv"))
        return out
    req.train_file, req.test_file = _find_file(data_dir, "train"), _find_file(data_dir, "test")
    if req.train_file is None and _asks_for_forecast(prompt):
        return _parse_forecast(prompt, data_dir, out, reader)
    req.sample_submission_file = _find_file(data_dir, "sample_submission")
    image_ids = req.test_file is None and req.train_file is not None and _names_image_files(data_dir, req.sample_submission_file)
    for role, name in (("train_file", req.train_file), ("test_file", req.test_file)):
        if name is None and not (role == "test_file" and image_ids):
            stem = role.split("_")[0]
            problems.append(RequestProblem(role, f"no {stem}.csv or {stem}.json in {data_dir}", f"put the {stem} table in {data_dir} as {stem}.csv"))
    if problems:
        return out
    description = _description(data_dir)
    out.description = description or prompt
    try:
        train_cols = _header(data_dir / req.train_file)
        sample_cols = _header(data_dir / req.sample_submission_file) if req.sample_submission_file else None
        if image_ids:  # MLE-bench's image layout: the test rows are the sample submission's image ids
            test_cols = sample_cols[:1]
            out.notes.append(f"no test table: the test rows are the images {req.sample_submission_file} names ({sample_cols[0]})")
        else:
            test_cols = _header(data_dir / req.test_file)
    except Exception as exc:  # pandas and the JSON reader raise many kinds
        problems.append(RequestProblem(
            "data", f"a table in {data_dir} cannot be read as CSV or JSON ({type(exc).__name__}: {str(exc)[:120]})",
            "save train, test and sample submission as UTF-8 CSV files with a header row",
        ))
        return out
    label_candidates = [c for c in train_cols if c not in test_cols]
    train_table = read_table(data_dir / req.train_file)
    _graph_files(data_dir, req, out)
    _fold_column(req, out, train_table, label_candidates)
    reading = None
    if reader is not None:
        from mcgs.llm import LLMError

        try:
            files = sorted(p.name for p in data_dir.iterdir())
            reading = reader.read(prompt, files, train_cols, test_cols, sample_cols)
            notes.append(f"the request was also read by {reader.settings.cheap_model}")
        except LLMError as exc:
            notes.append(f"the model could not read the request ({exc}); the rules alone read it")
    if reading is not None:
        c = req.constraints
        req.constraints = RequestConstraints(
            max_inference_ms_per_row=c.max_inference_ms_per_row or reading.max_inference_ms_per_row,
            max_model_mb=c.max_model_mb or reading.max_model_mb,
            interpretable=c.interpretable or bool(reading.interpretable),
        )

    _choose_metric(prompt, description, reading, req, out)
    _choose_target(prompt, reading, reader, req, out, train_cols, test_cols, sample_cols, label_candidates, train_table)
    _choose_id_column(req, out, data_dir, test_cols, sample_cols)
    _infer_task_kind(prompt, req, out, train_table, sample_cols)
    _time_and_constraint_notes(prompt, req, out, train_table, test_cols)
    return out


def _description(data_dir: Path) -> str:
    """The task description in the data folder (:data:`DESCRIPTION_FILES`, the first found), or ''."""
    return next(((data_dir / n).read_text(errors="replace") for n in DESCRIPTION_FILES if (data_dir / n).is_file()), "")


def _asks_for_forecast(prompt: str) -> bool:
    """Whether the request asks for a forecast many steps ahead ("forecast ...", "the next 96
    hours", "14 days ahead")."""
    from mcgs.forecast_request import find_horizon

    return bool(re.search(r"\bforecast", prompt, re.I)) or find_horizon(prompt) is not None


def _parse_forecast(prompt: str, data_dir: Path, out: ParsedRequest, reader) -> ParsedRequest:
    """A forecast request on the folder's history (:mod:`mcgs.forecast_request`), read by the
    model too when there is one; a folder without one history is a problem."""
    from mcgs.forecast_request import find_series_file, parse_forecast_request

    series = find_series_file(data_dir)
    if series is None:
        out.problems.append(RequestProblem("data", f"the request asks for a forecast but {data_dir} holds no one history to forecast "
                                           "(series.csv, or a single CSV)", "put the history in series.csv: a time column, then one column per series"))
        return out
    description = _description(data_dir)
    out.description = description or prompt
    reading = None
    if reader is not None:
        from mcgs.llm import LLMError

        try:
            reading = reader.read(prompt, sorted(p.name for p in data_dir.iterdir()), _header(data_dir / series), [], None)
            out.notes.append(f"the request was also read by {reader.settings.cheap_model}")
        except (LLMError, ValueError) as exc:
            out.notes.append(f"the model could not read the request ({exc}); the rules alone read it")
    out.forecast = parse_forecast_request(prompt, data_dir, series, out, reading)
    return out


def _choose_metric(prompt: str, description: str, reading, req: TaskRequest, out: ParsedRequest) -> None:
    """The metric: named in the request (by the rules, else by the model's reading), else in the
    description's evaluation section; several named, or none, is a problem."""
    from mcgs.metrics import get_metric

    problems, notes = out.problems, out.notes
    asked = find_metrics(prompt)
    if not asked and reading is not None and reading.metric:
        from mcgs.metrics import UnknownMetricError

        try:
            asked = [get_metric(reading.metric).name]
            notes.append(f"metric {asked[0]}: read from the request by the model")
        except UnknownMetricError:
            notes.append(f"the model read the metric as {reading.metric!r}, which mcgs does not know; ignored")
    described = find_metrics(_evaluation_section(description)) if description else []
    if len(asked) > 1:
        problems.append(RequestProblem("metric", f"the request names several metrics ({', '.join(asked)})", "keep the one the result will be judged by"))
    elif asked:
        req.metric = asked[0]
        notes.append(f"metric {req.metric}: from the request")
        if described and described[0] != req.metric:
            notes.append(f"the description's metric is {described[0]}; the request's {req.metric} is used")
    elif described:
        req.metric = described[0]
        notes.append(f"metric {req.metric}: from the task description")
    elif req.graph_edges:  # node classification: the published protocols (Planetoid, OGB) score accuracy
        req.metric = "accuracy"
        notes.append("metric accuracy: the node-classification default (Planetoid's protocol); name another to change it")
    else:
        problems.append(RequestProblem(
            "metric", "the request and the data folder do not say how results are judged",
            "name a metric in the request, e.g. 'judged by accuracy' (or roc_auc, log_loss, f1, rmse, rmsle, mae)",
        ))


def _choose_target(prompt: str, reading, reader, req: TaskRequest, out: ParsedRequest, train_cols, test_cols, sample_cols,
                   label_candidates, train_table) -> None:
    """The target: a column the request names (that the test table lacks), checked against the
    sample submission; else the sample submission's prediction columns; else the only training
    column the test table lacks. A named input column, or no way to tell, is a problem."""
    problems, notes = out.problems, out.notes
    named = [c for c in _mentioned_columns(prompt, train_cols) if c in label_candidates]
    phrase = _target_phrase(prompt)
    if not named and reading is not None and reading.target:
        named = [c for c in reading.target if c in label_candidates]
        if named:
            notes.append(f"target {', '.join(named)}: read from the request by the model")
        elif any(c in test_cols for c in reading.target):
            col = next(c for c in reading.target if c in test_cols)
            problems.append(RequestProblem(
                "target", f"the request (as {reader.settings.cheap_model} read it) asks to predict {col!r}, but the test table has that column, so it is an input",
                f"name the column to predict; the training table has these columns the test table lacks: {', '.join(label_candidates) or 'none'}",
            ))
    from_sample = None
    if sample_cols:
        from_sample = [c for c in sample_cols[1:] if c in label_candidates] or None
        if from_sample is None and len(sample_cols) > 2:
            # one probability column per class: the target is the train-only column whose
            # values are those class names
            for c in label_candidates:
                vals = {str(v) for v in train_table[c].dropna().unique()}
                if vals and vals == set(sample_cols[1:]):
                    from_sample = [c]
                    break
    if phrase and normalise_name(phrase) in {normalise_name(c) for c in test_cols if c in train_cols}:
        col = next(c for c in test_cols if normalise_name(c) == normalise_name(phrase))
        problems.append(RequestProblem(
            "target", f"the request asks to predict {col!r}, but the test table has that column, so it is an input, not the label",
            f"name a column the test table lacks: {', '.join(label_candidates) or '(none: add the labels to the training table)'}",
        ))
    elif named:
        req.target = named[:1] if not from_sample or len(from_sample) == 1 else [c for c in named if c in from_sample] or named[:1]
        if from_sample and set(req.target) - set(from_sample):
            problems.append(RequestProblem(
                "target", f"the request asks for {req.target[0]!r} but sample_submission.csv predicts {', '.join(from_sample)}",
                f"either predict {from_sample[0]!r} or replace sample_submission.csv",
            ))
        else:
            notes.append(f"target {', '.join(req.target)}: named in the request")
    elif from_sample:
        req.target = from_sample
        notes.append(f"target {', '.join(req.target)}: the sample submission's prediction column(s)")
    if req.target is None and not any(p.field == "target" for p in problems):
        if phrase and normalise_name(phrase) not in {normalise_name(c) for c in train_cols} and len(label_candidates) != 1:
            problems.append(RequestProblem(
                "target", f"the request does not name a column to predict ({phrase!r} is not a column of {req.train_file})",
                f"name the column to predict; the training table has these columns the test table lacks: {', '.join(label_candidates) or 'none'}",
            ))
        elif len(label_candidates) == 1:
            req.target = label_candidates
            notes.append(f"target {label_candidates[0]}: the only training column the test table lacks")
        else:
            problems.append(RequestProblem(
                "target", "the request does not say which column to predict" if label_candidates else f"{req.train_file} has no column that {req.test_file} lacks",
                f"name one of {', '.join(label_candidates)} in the request, e.g. 'predict {label_candidates[-1]}'" if label_candidates else "add the label column to the training table",
            ))


def _choose_id_column(req: TaskRequest, out: ParsedRequest, data_dir: Path, test_cols, sample_cols) -> None:
    """The id column: the sample submission's first column when the test table has it; without
    a sample submission, a unique test column named like an id (or a unique timestamp)."""
    import pandas as pd

    from mcgs.task import read_table

    notes = out.notes
    if sample_cols and sample_cols[0] in test_cols:
        req.id_column = sample_cols[0]
    elif not sample_cols:
        test_head = pd.read_csv(data_dir / req.test_file) if req.test_file.endswith(".csv") else read_table(data_dir / req.test_file)
        ids = [c for c in test_cols if re.fullmatch(r"(?i)(id|.*_id|id_.*|.*id)", c) and test_head[c].is_unique]
        dt = [c for c in test_cols if is_datetime_column(test_head[c]) and test_head[c].is_unique]
        req.id_column = (ids or dt or [None])[0]
        node = _graph_id_column(data_dir, req, test_head) if req.graph_edges else None
        if node:
            req.id_column = node
            notes.append(f"id column {node}: the test table's node ids, which the edge list {req.graph_edges} links")
        elif req.id_column:
            notes.append(f"id column {req.id_column}: unique in the test table (no sample submission; one is written)")
        else:
            notes.append("no id column: the submission follows the test table's row order")


def _graph_id_column(data_dir: Path, req: TaskRequest, test_head) -> str | None:
    """A graph task's node id column: the unique test column most of whose first values are
    nodes of the edge list (None when none is)."""
    import pandas as pd

    edges = pd.read_csv(data_dir / req.graph_edges, dtype=str, keep_default_na=False, nrows=200_000)
    linked = set(edges.iloc[:, 0]) | set(edges.iloc[:, 1] if edges.shape[1] > 1 else [])
    best, share = None, 0.0
    for c in test_head.columns:
        if not test_head[c].is_unique:
            continue
        values = test_head[c].astype(str).head(500)
        hit = values.isin(linked).mean()
        if hit > share:
            best, share = c, hit
    return best if share >= 0.5 else None


def _infer_task_kind(prompt: str, req: TaskRequest, out: ParsedRequest, train_table, sample_cols) -> None:
    """The task kind from the metric's kind and the target's values, with the contradictions
    (a regression metric on labels, a class metric on a many-valued number, a request's words
    against its metric) reported as problems."""
    import pandas as pd

    from mcgs.metrics import get_metric

    problems = out.problems
    if req.metric and req.target:
        metric = get_metric(req.metric)
        y = train_table[req.target]
        numeric = all(pd.api.types.is_numeric_dtype(y[c]) for c in y)
        n_unique = max(int(y[c].nunique()) for c in y)
        if metric.kind == "regression":
            binary = any(pd.api.types.is_bool_dtype(y[c]) or y[c].nunique() <= 2 for c in y)
            if not numeric or binary:
                problems.append(RequestProblem(
                    "metric", f"{req.metric} scores numbers but {req.target[0]!r} holds {'yes/no ' if binary else ''}labels ({', '.join(map(str, y[req.target[0]].dropna().unique()[:3]))} ...)",
                    "use a classification metric (accuracy, roc_auc, log_loss, f1) or name a numeric target",
                ))
            req.task_kind = "multi_target_regression" if len(req.target) > 1 else "regression"
        else:
            if numeric and n_unique > max(50, len(y) // 20):
                problems.append(RequestProblem(
                    "metric", f"{req.metric} scores classes but {req.target[0]!r} is a number with {n_unique} distinct values",
                    "use a regression metric (rmse, rmsle, mae) or name a categorical target",
                ))
            req.task_kind = "binary" if n_unique == 2 and len(req.target) == 1 else "multiclass" if len(req.target) == 1 else "multilabel"
            if req.task_kind == "multiclass" and metric.needs_proba and sample_cols and req.target[0] in sample_cols:
                problems.append(RequestProblem(
                    "metric", f"{req.metric} scores class probabilities, but sample_submission.csv has a single column "
                              f"{req.target[0]!r} for its {n_unique} classes (a label per row)",
                    "use a label metric (accuracy, f1_macro), or a sample submission with one probability column per class",
                ))
            if req.task_kind == "multilabel" and not metric.needs_proba:
                problems.append(RequestProblem(
                    "metric", f"{len(req.target)} label columns (multi-label) need a probability metric, not {req.metric}",
                    "use the mean column-wise ROC AUC ('average AUC of the labels')",
                ))
        words_regr = re.search(_REGRESSION_WORDS, prompt, re.I)
        words_clf = re.search(_CLASSIFICATION_WORDS, prompt, re.I)
        if req.task_kind == "regression" and words_clf and not words_regr:
            problems.append(RequestProblem("task_kind", f"the request says {words_clf.group(0)!r} (a classification) but {req.metric} is a regression metric", "fix the metric or the wording"))
        if req.task_kind in ("binary", "multiclass") and re.search(r"\bregression\b", prompt, re.I):
            problems.append(RequestProblem("task_kind", f"the request says 'regression' but {req.metric} is a classification metric", "fix the metric or the wording"))


def _time_and_constraint_notes(prompt: str, req: TaskRequest, out: ParsedRequest, train_table, test_cols) -> None:
    """A time column when the request speaks of time and a test column parses as dates; and a
    note for each constraint read from the request."""
    notes = out.notes
    if re.search(_TIME_WORDS, prompt, re.I):
        head = train_table.head(200)
        times = [c for c in head.columns if c in test_cols and is_datetime_column(head[c])]
        if times:
            req.time_column = times[0]
            notes.append(f"time-indexed: validation folds follow {times[0]} (earlier rows train, later rows validate)")
        else:
            notes.append("the request speaks of time but no column parses as a date or time; ordinary folds are used")
    c = req.constraints
    if c.interpretable:
        notes.append("constraint: interpretable models only")
    if c.max_inference_ms_per_row:
        notes.append(f"constraint: at most {c.max_inference_ms_per_row:g} ms per predicted row (recorded and shown to the coder; not measured yet)")
    if c.max_model_mb:
        notes.append(f"constraint: fitted model at most {c.max_model_mb:g} MB (recorded and shown to the coder; not measured yet)")


# --------------------------------------------------------------------------------------------
# writing the task folder


def write_task_folder(parsed: ParsedRequest, data_dir: str | Path, dest: str | Path, *, prompt: str = "") -> Path:
    """Write a task folder for :func:`mcgs.task.load_task`: ``task.yaml`` (from the request),
    links to the data folder's tables (never copies, never writes into ``data_dir``), a
    ``sample_submission.csv`` when the data has none, and ``request.json`` (the prompt, the
    schema, the notes).

    Raises:
        RequestError: the request still has problems.
    """
    import os

    import pandas as pd
    import yaml

    from mcgs.task import read_table

    if parsed.problems:
        raise RequestError(parsed.problems)
    req = parsed.request
    data_dir, dest = Path(data_dir).resolve(), Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    from mcgs.media import is_file_source

    if parsed.forecast is not None:
        return _write_forecast_folder(parsed, data_dir, dest, prompt)
    sources = [p.name for p in sorted(data_dir.iterdir()) if is_file_source(p)]  # an image task's folders and zips
    for name in (req.train_file, req.test_file, req.sample_submission_file, req.graph_edges, req.graph_nodes, *sources):
        if name:
            link = dest / name
            if link.is_symlink() or link.exists():  # a link from an earlier attempt may point elsewhere
                link.unlink()
            os.symlink(data_dir / name, link)
    sample = req.sample_submission_file
    if sample is None:
        test = read_table(data_dir / req.test_file)
        frame = pd.DataFrame({req.id_column: test[req.id_column]}) if req.id_column else pd.DataFrame(index=test.index)
        for t in req.target or []:
            frame[t] = 0
        sample = "sample_submission.csv"
        frame.to_csv(dest / sample, index=False)
    cfg: dict = {"name": data_dir.name, "metric": req.metric, "target": req.target, "train_file": req.train_file, "sample_submission_file": sample}
    if req.test_file:  # none: the test rows are the sample submission's image ids
        cfg["test_file"] = req.test_file
    if req.id_column:
        cfg["id_column"] = req.id_column
    else:
        cfg["no_id_column"] = True
    if req.time_column:
        cfg["validation"] = {"kind": "time_split", "time_column": req.time_column}
    elif req.fold_column:
        cfg["validation"] = {"kind": "predefined", "fold_column": req.fold_column}
    if req.graph_edges:
        cfg["graph"] = {"edges": req.graph_edges} | ({"nodes": req.graph_nodes} if req.graph_nodes else {})
    if req.constraints != RequestConstraints():
        cfg["constraints"] = req.constraints.model_dump(exclude_defaults=True)
    cfg["description"] = (prompt.strip() + "\n\n" + parsed.description.strip()).strip() if parsed.description != prompt else prompt
    (dest / "task.yaml").write_text(yaml.safe_dump(cfg, sort_keys=False, allow_unicode=True))
    (dest / "request.json").write_text(json.dumps({"prompt": prompt, "request": req.model_dump(), "notes": parsed.notes}, indent=2))
    return dest


def _write_forecast_folder(parsed: ParsedRequest, data_dir: Path, dest: Path, prompt: str) -> Path:
    """A forecast request's task folder: a link to the history and task.yaml's ``forecast``."""
    import os

    import yaml

    name = parsed.forecast["file"]
    link = dest / name
    if link.is_symlink() or link.exists():
        link.unlink()
    os.symlink(data_dir / name, link)
    description = (prompt.strip() + "\n\n" + parsed.description.strip()).strip() if parsed.description != prompt else prompt
    cfg = {"name": data_dir.name, "metric": parsed.request.metric, "forecast": parsed.forecast, "description": description}
    if parsed.request.constraints != RequestConstraints():
        cfg["constraints"] = parsed.request.constraints.model_dump(exclude_defaults=True)
    (dest / "task.yaml").write_text(yaml.safe_dump(cfg, sort_keys=False, allow_unicode=True))
    (dest / "request.json").write_text(json.dumps({"prompt": prompt, "request": parsed.request.model_dump(), "notes": parsed.notes,
                                                   "forecast": parsed.forecast}, indent=2))
    return dest


def task_from_request(prompt: str, data_dir: str | Path, dest: str | Path, *, reader: RequestReader | None = None):
    """Parse, verify and load: the Python equivalent of ``mcgs run --prompt ... --data DIR``
    (``reader``: see :func:`parse_request`).

    Returns:
        ``(TaskSpec, ParsedRequest)``.

    Raises:
        RequestError: missing or contradictory facts, each with what to add.
        mcgs.task.TaskError: the written task folder does not load (a data problem).
    """
    from mcgs.task import load_task

    parsed = parse_request(prompt, data_dir, reader=reader)
    folder = write_task_folder(parsed, data_dir, dest, prompt=prompt)
    return load_task(folder), parsed
