"""Code Review: a static review of every program before it runs (DESIGN §3, issue 4).

The review reads the program's syntax tree (Python's :mod:`ast`), never executes it, and gives
one of three verdicts:

* ``passed`` — nothing to object to;
* ``fixed`` — a mechanical problem was repaired and the repaired program runs instead
  (e.g. ``n_jobs=-1``, which would take every core of the machine instead of the sandbox's
  share, becomes the thread count the sandbox grants);
* ``rejected`` — the program breaks the solution contract or the sandbox rules; it is not run,
  and the reasons are stored on the node so Debug can address them.

What is rejected: a program that does not parse; that never refers to one of the three
required outputs; that reads held-out or label files (paths naming ``private``, ``answers``,
``held-out`` data) or any path outside its workspace (absolute paths, ``..``, ``~``); that
imports a network module or opens sockets; that starts processes (``subprocess``, ``os.system``,
``os.exec*``...); that runs code built at run time (``exec``/``eval``); or that fits a model on
validation rows (a ``.fit`` whose data argument is named like a validation split).

The sandbox enforces the same rules at run time where it can; this review catches them before
a candidate wastes its time slot and gives Debug a reason it can read. It is a lint, not a
proof: a determined program can hide a socket behind ``getattr``. (ML-Master and AIDE check a
program only by running it; the pre-execution review is AutoMLGen's verification step, DESIGN
§3.)
"""

from __future__ import annotations

import ast
import dataclasses
import re
from typing import Literal, Sequence

__all__ = ["Review", "review_program", "REQUIRED_OUTPUTS", "FORECAST_OUTPUTS"]

# (contract path, key in task.json "outputs") of the three outputs a program must write.
REQUIRED_OUTPUTS = (("working/oof.csv", "oof"), ("working/test_pred.csv", "test_pred"), ("submission/submission.csv", "submission"))

# what a forecasting program must name: its validation forecasts (the path or task.json's
# forecast["output"]) and forecast mode's client (serve)
FORECAST_OUTPUTS = (("working/val_forecast.npy", "output"), ("input/mcgs_forecast.py", "serve"))
# statistics that, taken over the whole history, carry the validation rows into a fit or a scaler
WHOLE_SERIES_STATS = frozenset({"mean", "std", "var", "min", "max", "quantile", "median"})

NETWORK_MODULES = frozenset(
    {"socket", "ssl", "requests", "urllib", "urllib2", "urllib3", "http", "httpx", "aiohttp", "ftplib", "smtplib",
     "poplib", "imaplib", "telnetlib", "websocket", "websockets", "paramiko", "xmlrpc", "socketserver", "anthropic", "openai"}
)
PROCESS_MODULES = frozenset({"subprocess", "pty", "pexpect", "sh"})
PROCESS_CALLS = re.compile(r"^os\.(system|popen|fork|forkpty|kill|killpg|exec\w*|spawn\w*|posix_spawn\w*)$|^asyncio\.create_subprocess_\w+$")
HELD_OUT = re.compile(r"(^|[/\\_.-])(private|answers?|held[_-]?out|test_labels?|solution\.csv|gold)([/\\_.-]|$)", re.IGNORECASE)
# Names that denote validation rows in fold loops: X_va, va_idx, y_valid, X_val, valid_rows, holdout...
VALIDATION_NAME = re.compile(r"(^|_)(va|val|valid|validation|holdout|dev)(_|$|idx|rows|ix)", re.IGNORECASE)
FIT_METHODS = frozenset({"fit", "fit_transform", "partial_fit"})
ALL_CORES = re.compile(r"\b(n_jobs|thread_count|nthread|num_threads)\s*=\s*-1\b")
SANDBOX_THREADS = 'int(__import__("os").environ.get("OMP_NUM_THREADS", "1"))'


@dataclasses.dataclass(frozen=True)
class Review:
    """Verdict of the static review.

    Attributes:
        verdict: ``passed``, ``fixed`` or ``rejected``.
        reasons: Why it was rejected, or what was fixed (one sentence each).
        code: The program to run (the repaired one when ``fixed``; the original otherwise).
        model_review: The LLM's review when one ran (``verdict``, ``reasons``, ``model``).
    """

    verdict: Literal["passed", "fixed", "rejected"]
    reasons: tuple[str, ...]
    code: str
    model_review: dict | None = None

    @property
    def rejected(self) -> bool:
        return self.verdict == "rejected"

    def with_model_review(self, review: dict, **static) -> "Review":
        """This review plus a model's verdict (:meth:`mcgs.coders.anthropic.AnthropicCoder.review_program`).

        A ``revise`` verdict's revised program replaces the code once it passes the static
        review too (``static``: :func:`review_program`'s keywords); the stored review keeps the
        problems and the diff (``model_review["diff"]``), not the revised program. A revision the
        static review rejects rejects the node, with both reviews' reasons. ``pass`` and
        ``unavailable`` (a review that could not be had) keep the program."""
        import difflib

        review = dict(review)
        revised = review.pop("revised_code", None)
        if review.get("verdict") != "revise" or not revised:
            return dataclasses.replace(self, model_review=review)
        review["diff"] = "".join(difflib.unified_diff(self.code.splitlines(True), revised.splitlines(True), "written", "revised", n=2))[:20_000]
        second = review_program(revised, **static)
        if second.rejected:
            reasons = tuple(f"model review: {p}" for p in review.get("problems") or []) + tuple(f"revised program: {r}" for r in second.reasons)
            return dataclasses.replace(self, verdict="rejected", reasons=reasons, model_review=review)
        fixed = tuple(f"model review: {p}" for p in review.get("problems") or [])
        return dataclasses.replace(self, verdict="fixed", reasons=self.reasons + fixed + second.reasons, code=second.code, model_review=review)

    def as_dict(self) -> dict:
        """JSON-ready form stored on the node (without the code)."""
        out = {"verdict": self.verdict, "reasons": list(self.reasons)}
        if self.model_review is not None:
            out["model_review"] = self.model_review
        return out


def _dotted(node: ast.AST) -> str:
    """``a.b.c`` for a Name/Attribute chain, else ''."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return ""


def _names_in(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


def _path_problem(text: str) -> str | None:
    """Why a string constant used as a path is not allowed, or None."""
    if "\n" in text or len(text) > 300:
        return None  # prose or data, not a path
    s = text.strip()
    if not ("/" in s or "\\" in s or s.startswith("~") or re.search(r"\.[A-Za-z]{2,7}$", s)):
        return None  # not a path (a label such as "Private" is fine)
    if HELD_OUT.search(s):
        return f"refers to held-out or label data ({s!r}); a program may read only its input/ folder"
    if s.startswith("~") or re.match(r"^(\.\./|\.\.\\|\.\.$)", s) or "/../" in s:
        return f"refers to a path outside its workspace ({s!r})"
    if s.startswith("/") and not s.startswith(("/dev/null", "/proc/self", "/tmp")) and re.match(r"^/[\w.-]+(/[\w.-]*)*$", s):
        return f"uses an absolute path ({s!r}); use paths relative to the workspace (input/, working/, submission/)"
    return None


class _Visitor(ast.NodeVisitor):
    def __init__(self) -> None:
        self.problems: list[str] = []
        self.strings: set[str] = set()
        # strings that may name a column: all but the step names of scikit-learn pipelines and
        # column transformers, ("cat", OneHotEncoder(), cols), which name no column
        self.column_strings: set[str] = set()
        self._step_names: set[int] = set()

    def _flag(self, node: ast.AST, message: str) -> None:
        line = getattr(node, "lineno", None)
        self.problems.append(f"line {line}: {message}" if line else message)

    def _check_module(self, node: ast.AST, module: str) -> None:
        top = module.split(".")[0]
        if top in NETWORK_MODULES or module == "urllib.request":
            self._flag(node, f"imports {module!r}: candidates run without network access")
        elif top in PROCESS_MODULES:
            self._flag(node, f"imports {module!r}: candidates may not start processes")

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self._check_module(node, alias.name)
        self.generic_visit(node)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.module and node.level == 0:
            self._check_module(node, node.module)
            if node.module == "os":
                for alias in node.names:
                    if PROCESS_CALLS.match(f"os.{alias.name}"):
                        self._flag(node, f"imports os.{alias.name}: candidates may not start processes")
        self.generic_visit(node)

    def visit_Tuple(self, node: ast.Tuple) -> None:
        first = node.elts[0] if node.elts else None
        if len(node.elts) >= 2 and isinstance(first, ast.Constant) and isinstance(first.value, str) and isinstance(node.elts[1], ast.Call):
            self._step_names.add(id(first))
        self.generic_visit(node)

    def visit_Constant(self, node: ast.Constant) -> None:
        if isinstance(node.value, str):
            self.strings.add(node.value)
            if id(node) not in self._step_names:
                self.column_strings.add(node.value)
            problem = _path_problem(node.value)
            if problem:
                self._flag(node, problem)

    def visit_Call(self, node: ast.Call) -> None:
        name = _dotted(node.func)
        if name in ("exec", "eval", "compile"):
            self._flag(node, f"calls {name}(): code built at run time cannot be reviewed")
        elif PROCESS_CALLS.match(name):
            self._flag(node, f"calls {name}(): candidates may not start processes")
        elif name in ("__import__", "importlib.import_module") and node.args and isinstance(node.args[0], ast.Constant):
            self._check_module(node, str(node.args[0].value))
        if isinstance(node.func, ast.Attribute) and node.func.attr in FIT_METHODS:
            data_args = list(node.args[:2]) + [k.value for k in node.keywords if k.arg in ("X", "y")]
            for arg in data_args:
                bad = sorted(n for n in _names_in(arg) if VALIDATION_NAME.search(n))
                if bad:
                    self._flag(node, f"fits on validation rows (.{node.func.attr} on {', '.join(bad)}); fit only on the training rows of each fold")
                    break
        self.generic_visit(node)


class _HistoryVisitor(ast.NodeVisitor):
    """Time-series leakage in a forecasting program: a model or scaler fitted on, or a statistic
    taken over, the whole history (training and validation rows) rather than its training rows.

    A name is the whole history when it is bound to an expression that reads the history file
    (``read_csv`` of a string naming ``history``, or of task.json's ``forecast["history"]``) or
    uses such a name without slicing it; a subscript (``values[:train_rows]``) ends it.
    """

    def __init__(self) -> None:
        self.whole: set[str] = set()
        self.problems: list[str] = []

    def _is_whole(self, node: ast.AST) -> bool:
        if isinstance(node, ast.Subscript) and not _is_column_pick(node.slice):
            return False  # a row slice (or rows named by a variable): no longer the whole history
        if isinstance(node, ast.Name):
            return node.id in self.whole
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return "history" in node.value and node.value.endswith((".csv", "history"))
        return any(self._is_whole(child) for child in ast.iter_child_nodes(node))

    def visit_Assign(self, node: ast.Assign) -> None:
        whole = self._is_whole(node.value)
        for target in node.targets:
            for name in (target.elts if isinstance(target, ast.Tuple) else [target]):
                if isinstance(name, ast.Name):
                    (self.whole.add if whole else self.whole.discard)(name.id)
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        f = node.func
        if isinstance(f, ast.Attribute) and f.attr in FIT_METHODS:
            if any(self._is_whole(a) for a in node.args[:2]):
                line = node.lineno
                self.problems.append(f"line {line}: .{f.attr} on the whole history: fit models and scalers on the training rows "
                                     f"(history rows [0, train_rows)) only; the validation rows are what the engine scores")
        elif isinstance(f, ast.Attribute) and f.attr in WHOLE_SERIES_STATS and self._is_whole(f.value):
            self.problems.append(f"line {node.lineno}: .{f.attr}() over the whole history: statistics for scaling or features "
                                 f"must come from the training rows (or the window's own look-back) only")
        self.generic_visit(node)


def _is_column_pick(node: ast.AST) -> bool:
    """Whether a subscript keeps every row: a column name or list (``frame["x"]``,
    ``frame[["x", "y"]]``, ``frame[FC["input_columns"]]``). A slice (``values[:n]``,
    ``values[:n, :]``), an integer or a variable (``values[idx]``, which may pick rows) is taken
    as a row selection."""
    if isinstance(node, ast.Constant):
        return isinstance(node.value, str)
    return isinstance(node, (ast.List, ast.Subscript, ast.Attribute))


def review_program(code: str, train_only_columns: Sequence[str] = (), forecast: bool = False) -> Review:
    """Review a candidate program statically.

    Args:
        code: Source of ``solution.py``.
        train_only_columns: Training columns the test table lacks (the profile's
            ``train_only_columns``): a program naming one in a string constant is rejected
            (the step name of a pipeline or column transformer, ``("cat", OneHotEncoder(), cols)``,
            is not a column),
            since those columns are unknown at prediction time and leak the outcome (pizza's
            retrieval-time fields).
        forecast: The program is a forecasting task's: it must write its validation
            forecasts and serve forecast mode (:data:`FORECAST_OUTPUTS`) instead of the table
            outputs, and may not fit or take scaling statistics on the whole history
            (:class:`_HistoryVisitor`).

    Returns:
        A :class:`Review`. Never raises for a bad program: a syntax error is a rejection
        reason (with its line), not an exception.
    """
    fixes = []
    if ALL_CORES.search(code):
        code = ALL_CORES.sub(lambda m: f"{m.group(1)}={SANDBOX_THREADS}", code)
        fixes.append("n_jobs=-1 (every core of the machine) replaced by the sandbox's thread count OMP_NUM_THREADS")
    try:
        tree = ast.parse(code)
    except SyntaxError as exc:
        return Review("rejected", (f"does not parse: {exc.msg} at line {exc.lineno}",), code)
    v = _Visitor()
    v.visit(tree)
    problems = list(dict.fromkeys(v.problems))
    leaked = sorted(set(train_only_columns) & v.column_strings)
    if leaked:
        problems.append(
            f"reads training-only column(s) {', '.join(map(repr, leaked[:5]))}: the test table lacks them, so they "
            f"cannot be features (use only columns the test table has)"
        )
    if forecast:
        history = _HistoryVisitor()
        history.visit(tree)
        problems += history.problems
        names = v.strings | {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)} | {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)}
        names |= {a.name for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom)) for a in n.names}
        for path, key in FORECAST_OUTPUTS:
            base = path.rsplit("/", 1)[1].removesuffix(".py")
            if not any(s == key or base in s for s in names):
                problems.append(f"never writes {path} (neither the path nor task.json's forecast[{key!r}] appears)" if key == "output"
                                else "never serves forecast mode: load the model and call serve() of input/mcgs_forecast.py when MCGS_MODE is forecast")
    for path, key in () if forecast else REQUIRED_OUTPUTS:
        base = path.rsplit("/", 1)[1]
        if not any(s == key or s.endswith(base) for s in v.strings):
            problems.append(f"never writes {path} (neither the path nor task.json's outputs[{key!r}] appears)")
    if problems:
        return Review("rejected", tuple(problems), code)
    if fixes:
        return Review("fixed", tuple(fixes), code)
    return Review("passed", (), code)
