"""The cost ledger: one row per language-model call of a run (:class:`LLMCall`), written by
the coders and read by ``mcgs status``, the report and the budget."""

from __future__ import annotations

import dataclasses

from sqlalchemy import select, update

from mcgs.storage.errors import writes as _writes
from mcgs.storage.models import LLMCallModel

__all__ = ["LLMCall", "LedgerQueries"]


@dataclasses.dataclass(frozen=True)
class LLMCall:
    """One row of the cost ledger (see :class:`mcgs.storage.models.LLMCallModel`)."""

    operator: str
    model: str
    kind: str = "code"
    node_seq: int | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    cache_write_tokens: int = 0
    cache_read_tokens: int = 0
    latency_s: float = 0.0
    request_id: str | None = None
    cost_usd: float = 0.0
    outcome: str = "ok"
    error: str | None = None


class LedgerQueries:
    """The ledger's queries, part of :class:`mcgs.storage.Storage` (which supplies
    ``_session``, ``read_only``, ``where`` and ``on_full``)."""

    @_writes
    def add_llm_call(self, run_id: int, call: LLMCall) -> int:
        """Record one language-model call (its own transaction, so spend survives a crash).

        Returns:
            The row's id (for :meth:`assign_llm_calls`).
        """
        with self._session.begin() as s:
            row = LLMCallModel(run_id=run_id, **dataclasses.asdict(call))
            s.add(row)
            s.flush()
            return row.id

    @_writes
    def assign_llm_calls(self, run_id: int, ids, node_seq: int) -> None:
        """Label ledger rows written before their node existed (a draft plan written for
        screening, drafted later) with the node's sequence number."""
        ids = [int(i) for i in ids]
        if ids:
            with self._session.begin() as s:
                s.execute(update(LLMCallModel).where(LLMCallModel.run_id == run_id, LLMCallModel.id.in_(ids)).values(node_seq=node_seq))

    def llm_calls(self, run_id: int) -> list[LLMCall]:
        """The run's ledger in call order."""
        fields = [f.name for f in dataclasses.fields(LLMCall)]
        with self._session() as s:
            rows = s.scalars(select(LLMCallModel).where(LLMCallModel.run_id == run_id).order_by(LLMCallModel.id))
            return [LLMCall(**{k: getattr(m, k) for k in fields}) for m in rows]

    def llm_spend_usd(self, run_id: int) -> float:
        """Total cost of the run's calls, US dollars."""
        from sqlalchemy import func

        with self._session() as s:
            return float(s.scalar(select(func.coalesce(func.sum(LLMCallModel.cost_usd), 0.0)).where(LLMCallModel.run_id == run_id)))
