"""mcgs: Monte Carlo Graph Search over machine-learning solution programs.

Importing :mod:`mcgs` is cheap and silent: the names below load their modules on first use, so
pandas, scikit-learn, LightGBM and the Anthropic SDK are imported only by the parts that need
them (a test checks ``sys.modules`` after ``import mcgs``).

The library facade (see docs/api.md)::

    search = mcgs.create_search(task="path/to/task", run_dir="runs/a")
    search.run(time_budget="10m")
    search.best_node, search.nodes_dataframe()
    mcgs.load_search("sqlite:///runs/a/mcgs.db")
    mcgs.load_run("runs/a")          # a frozen snapshot, read without an engine
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

#: public name -> module that defines it (PEP 562 lazy attributes)
_LAZY = {
    "create_search": "mcgs.api",
    "load_search": "mcgs.api",
    "Search": "mcgs.search",
    "RunError": "mcgs.run_folder",
    "load_run": "mcgs.snapshot",
    "StopReason": "mcgs.budget",
    "ExecutionResult": "mcgs.sandbox",
    "result_of_run": "mcgs.sandbox",
    "RunSnapshot": "mcgs.snapshot",
    "SearchSettings": "mcgs.settings",
    "TaskSpec": "mcgs.task",
    "TaskError": "mcgs.task",
    "load_task": "mcgs.task",
    "FrozenNode": "mcgs.node",
    "FrozenEdge": "mcgs.node",
    "NodeState": "mcgs.node",
    "Operator": "mcgs.node",
    "EdgeKind": "mcgs.node",
    "register_metric": "mcgs.metrics",
    "get_metric": "mcgs.metrics",
    "CoderAnswer": "mcgs.coders",
    "CoderRequest": "mcgs.coders",
}

__all__ = ["__version__", *_LAZY]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'mcgs' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
