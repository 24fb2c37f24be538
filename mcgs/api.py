"""The library facade: create or load a search, run it, read its nodes (DESIGN §3).

Modelled on Optuna's ``create_study`` / ``load_study``: a search lives in a storage (a URL) and
has a name; everything it does is in that storage, so another process, or a notebook, can load
it by name and read it while it runs::

    import mcgs

    search = mcgs.create_search(task="path/to/task", run_dir="runs/a", policy="mcgs")
    search.run(time_budget="10m")
    print(search.best_node.score)
    df = search.nodes_dataframe()

    same = mcgs.load_search(storage="sqlite:///runs/a/mcgs.db")

Everything here imports its dependencies when called, so ``import mcgs`` stays cheap.
"""

from __future__ import annotations

import datetime as _dt
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Sequence

from mcgs.settings import setting_choices

if TYPE_CHECKING:
    from mcgs.coders import Coder
    from mcgs.node import FrozenNode
    from mcgs.search import Search
    from mcgs.settings import SearchSettings
    from mcgs.task import TaskSpec

__all__ = ["create_search", "load_search"]

_CODERS = setting_choices("coder")
_POLICIES = setting_choices("policy")


def create_search(
    task: str | Path | TaskSpec,
    *,
    run_dir: str | Path | None = None,
    storage: str | None = None,
    coder: str | Coder | None = None,
    policy: str | None = None,
    callbacks: Sequence[Callable[[Search, FrozenNode], None]] = (),
    settings: SearchSettings | None = None,
    baseline: str | Path | None = None,
    **options: Any,
) -> Search:
    """Create a new search on a task.

    Args:
        task: A task folder (``task.yaml`` + tables, or an MLE-bench competition folder), or a
            :class:`~mcgs.task.TaskSpec`.
        run_dir: Folder for the run's artifacts (input copy, node workspaces, ``best/``); it
            names the run. Default ``./mcgs-runs/<task name>-<UTC time>``.
        storage: SQLAlchemy URL of the storage (e.g. PostgreSQL for workers on several
            machines); default ``sqlite:///RUN_DIR/mcgs.db``.
        coder: ``"recipe"`` (offline), ``"anthropic"``, ``"auto"``, or an object with
            ``write(request) -> CoderAnswer`` (:class:`mcgs.coders.Coder`). None: the coder of
            ``settings``, else ``MCGS_CODER`` or the settings file, else ``"auto"``.
        policy: ``"mcgs"`` (graph search), ``"tree"`` (UCT over a tree) or ``"greedy"`` (AIDE's).
            None: as for ``coder`` (``MCGS_POLICY``; default ``"mcgs"``).
        callbacks: Called as ``callback(search, node)`` after every finished node, with a frozen
            snapshot of the node. An exception in a callback stops the run (every finished node
            is kept; running it again resumes) and reaches the caller of ``run``.
        settings: A full :class:`~mcgs.settings.SearchSettings` (or a dict of its fields);
            ``options`` override its fields.
        baseline: A starter program run as the first node (MLAgentBench mode).
        **options: Any :class:`~mcgs.settings.SearchSettings` field, e.g. ``time_budget_s=600``,
            ``seed=1``, ``workers=2``, ``max_nodes=20``.

    Returns:
        The :class:`~mcgs.search.Search`, not yet running: call :meth:`~mcgs.search.Search.run`.

    Raises:
        TaskError: the task folder is invalid (the message names the file and the fix).
        RunError: ``run_dir`` already holds a run, or the storage cannot be opened.
        ValueError: an unknown ``coder``, ``policy`` or setting.
    """
    from mcgs.search import create_search as _create
    from mcgs.settings import SearchSettings
    from mcgs.task import TaskSpec, load_task

    if policy is not None and policy not in _POLICIES:
        raise ValueError(f"policy must be one of {', '.join(_POLICIES)}, got {policy!r}")
    coder_obj = None
    if isinstance(coder, str):  # None: from settings, MCGS_CODER, the settings file, or auto
        if coder not in _CODERS:
            raise ValueError(f"coder must be one of {', '.join(_CODERS)} or a Coder object, got {coder!r}")
        options.setdefault("coder", coder)
    elif coder is not None:
        if not callable(getattr(coder, "write", None)):
            raise ValueError(f"coder {coder!r} has no write(request) method; see mcgs.coders.Coder")
        coder_obj = coder
        options.setdefault("coder", "recipe")  # what a resumed run falls back to without this object
    if policy is not None:
        options["policy"] = policy
    if isinstance(settings, dict):  # the fields of SearchSettings, as a mapping
        settings = SearchSettings(**settings)
    if settings is not None and not isinstance(settings, SearchSettings):
        raise ValueError(f"settings must be a mcgs.SearchSettings or a dict of its fields, got {type(settings).__name__}")
    base = settings.model_dump() if settings is not None else {}
    unknown = set(options) - set(SearchSettings.model_fields)
    if unknown:
        raise ValueError(f"unknown setting(s) {', '.join(sorted(unknown))}; see mcgs.SearchSettings for the fields")
    merged = SearchSettings(**{**base, **options})
    spec = task if isinstance(task, TaskSpec) else load_task(task)
    if run_dir is None:
        stamp = _dt.datetime.now(_dt.timezone.utc).strftime("%Y%m%dT%H%M%S")
        run_dir = Path("mcgs-runs") / f"{spec.name}-{stamp}"
    return _create(spec, run_dir, settings=merged, coder=coder_obj, callbacks=callbacks, baseline=baseline, storage=storage)


def load_search(
    storage: str | Path,
    name: str | None = None,
    *,
    run_dir: str | Path | None = None,
    coder: Coder | None = None,
    callbacks: Sequence[Callable[[Search, FrozenNode], None]] = (),
    time_budget_s: float | None = None,
) -> Search:
    """Load a search from its storage: to read it (also while another process runs it), to
    resume it with :meth:`~mcgs.search.Search.run`, or to work on it.

    Args:
        storage: A storage URL (``sqlite:///RUN_DIR/mcgs.db``, ``postgresql+psycopg://...``) or
            a run directory.
        name: The run's name (its run directory's name); default the only run in the storage.
        run_dir: The run's artifacts folder; default the folder of a SQLite storage file.
        coder: The coder object for a resumed run whose coder was not a built-in one.
        callbacks: As for :func:`create_search`.
        time_budget_s: A new total time budget, seconds (default the stored one).

    Returns:
        The :class:`~mcgs.search.Search`; :meth:`~mcgs.search.Search.run` resumes it.

    Raises:
        RunError: no such run, several runs and no ``name``, the task data changed, or the
            run's metric is a custom one not registered in this process
            (:func:`mcgs.register_metric`).
    """
    from mcgs.search import RunError, open_search

    text = str(storage)
    if "://" not in text:  # a run directory
        return open_search(Path(text), storage=None, name=name, coder=coder, callbacks=callbacks, time_budget_s=time_budget_s)
    if run_dir is None:
        if not text.startswith("sqlite:///"):
            raise RunError(f"give run_dir= (the run's artifacts folder) to load a run from {text.split('://')[0]} storage")
        run_dir = Path(text[len("sqlite:///"):]).parent
    return open_search(Path(run_dir), storage=text, name=name, coder=coder, callbacks=callbacks, time_budget_s=time_budget_s)
