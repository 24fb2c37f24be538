"""Operators: each builds its coder request from graph context (DESIGN §3).

An operator is a plain function ``build_request(context, expansion) -> CoderRequest``
(aira-dojo style: operators are functions, prompts and recipes are templates). The engine
turns the coder's answer into a node and records the operator on the node and its edges
(``derives`` from the primary parent; ``fuses`` from Fusion/Aggregate inputs, :func:`edges`;
``references`` from the history Evolve read). Every program then passes the static
:mod:`~mcgs.operators.code_review` before it runs; Ensemble nodes are built by the engine with
no coder (:mod:`~mcgs.operators.ensemble`).
Installed as ``mcgs.operators``.
"""

from __future__ import annotations

from typing import Callable

from mcgs.coders import CoderRequest
from mcgs.node import EdgeKind, Operator
from mcgs.operators import aggregate, debug, draft, evolve, fusion, improve
from mcgs.operators.context import OperatorContext
from mcgs.policy import Expansion

__all__ = ["OperatorContext", "OPERATORS", "build_request", "edges"]

OPERATORS: dict[Operator, Callable[[OperatorContext, Expansion], CoderRequest]] = {
    Operator.DRAFT: draft.build_request,
    Operator.DEBUG: debug.build_request,
    Operator.IMPROVE: improve.build_request,
    Operator.EVOLVE: evolve.build_request,
    Operator.FUSION: fusion.build_request,
    Operator.AGGREGATE: aggregate.build_request,
}


def build_request(context: OperatorContext, expansion: Expansion) -> CoderRequest:
    """Dispatch to the operator named by the expansion.

    Raises:
        KeyError: the operator has no implementation yet.
    """
    return OPERATORS[expansion.operator](context, expansion)


#: Operators whose inputs are stored as ``fuses`` edges (the others' context nodes are ``references``).
_FUSING = {Operator.FUSION: fusion.edges, Operator.AGGREGATE: aggregate.edges}


def edges(expansion: Expansion) -> list[tuple[int, EdgeKind, dict]]:
    """The edges a new node of ``expansion`` gets besides ``derives`` from its primary parent:
    ``(source id, kind, data)``, as :meth:`mcgs.storage.Storage.add_node` takes them."""
    own = _FUSING.get(expansion.operator)
    if own is not None:
        return own(expansion)
    return [(i, EdgeKind.REFERENCES, {}) for i in expansion.references]
