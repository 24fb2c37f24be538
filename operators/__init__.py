"""Operators: one module per operator holds everything about it (DESIGN §3).

Each of ``draft``, ``debug``, ``improve``, ``evolve``, ``fusion`` and ``aggregate`` defines:

* ``OPERATOR``: the :class:`~mcgs.node.Operator` it implements;
* ``propose(graph, node_id, settings, higher_is_better) -> Expansion | None``: when the policy
  may choose it at a node (Aggregate's ``propose(graph, settings, higher_is_better)`` looks at
  the whole graph: it expands the root);
* ``build_request(context, expansion) -> CoderRequest``: what the coder is told;
* ``edges(expansion)`` when it stores more than the ``derives`` edge from its primary parent
  (Fusion and Aggregate: ``fuses``; the others' context nodes become ``references``);
* ``PROMPT``: its LLM prompt template in ``operators/prompts/``;
* ``recipe_step(coder, request, rng) -> (config, plan)``: what the offline recipe coder does;
  ``recipe_foreign(request) -> str | None`` when that step builds on its inputs' recipe
  configs: why it cannot (an input is a program the recipe coder did not write), or None.

:mod:`~mcgs.operators.code_review` reviews every program statically before it runs, and
:mod:`~mcgs.operators.ensemble` builds Ensemble nodes with no coder. To add an operator, add a
module with these names, a member to :class:`~mcgs.node.Operator`, and the module to the
tables below; the policy asks :data:`AT_NODE` in order.
Installed as ``mcgs.operators``.
"""

from __future__ import annotations

import random
from types import ModuleType
from typing import Any, Callable

from mcgs.branches import Expansion
from mcgs.coders import CoderRequest
from mcgs.node import EdgeKind, Operator
from mcgs.operators import aggregate, debug, draft, evolve, fusion, improve
from mcgs.operators.context import OperatorContext

__all__ = ["OperatorContext", "MODULES", "OPERATORS", "AT_NODE", "PROMPTS", "RECIPE_STEPS", "RECIPE_FOREIGN", "build_request", "edges"]

#: The module of each operator a coder writes a program for.
MODULES: dict[Operator, ModuleType] = {m.OPERATOR: m for m in (draft, debug, improve, evolve, fusion, aggregate)}

#: The operators asked, in this order, whether they apply at the node UCT's descent reached
#: (the first that proposes wins; their conditions on the node's state are exclusive except
#: Fusion before Evolve before Improve at a valid node).
AT_NODE: tuple[ModuleType, ...] = (draft, debug, fusion, evolve, improve)

OPERATORS: dict[Operator, Callable[[OperatorContext, Expansion], CoderRequest]] = {op: m.build_request for op, m in MODULES.items()}
PROMPTS: dict[Operator, str] = {op: m.PROMPT for op, m in MODULES.items()}
RECIPE_STEPS: dict[Operator, Callable[[Any, CoderRequest, random.Random], tuple[dict, str]]] = {op: m.recipe_step for op, m in MODULES.items()}
#: Each operator's ``recipe_foreign`` (Draft has none: it builds on nothing).
RECIPE_FOREIGN: dict[Operator, Callable[[CoderRequest], str | None]] = {
    op: m.recipe_foreign for op, m in MODULES.items() if hasattr(m, "recipe_foreign")
}


def build_request(context: OperatorContext, expansion: Expansion) -> CoderRequest:
    """Dispatch to the operator named by the expansion.

    Raises:
        KeyError: the operator has no implementation yet.
    """
    return OPERATORS[expansion.operator](context, expansion)


def edges(expansion: Expansion) -> list[tuple[int, EdgeKind, dict]]:
    """The edges a new node of ``expansion`` gets besides ``derives`` from its primary parent:
    ``(source id, kind, data)``, as :meth:`mcgs.storage.Storage.add_node` takes them."""
    module = MODULES.get(expansion.operator)
    own = getattr(module, "edges", None)
    if own is not None:
        return own(expansion)
    return [(i, EdgeKind.REFERENCES, {}) for i in expansion.references]
