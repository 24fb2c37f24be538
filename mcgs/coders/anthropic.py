"""The language-model coder: operators get their programs from Claude, or from a model behind an
OpenAI-compatible server (vLLM, Ollama, llama.cpp, hosted APIs) (DESIGN §5).

Same :class:`~mcgs.coders.Coder` protocol and solution contract as the recipe coder. Per call:

1. **Prompt** from Jinja2 templates next to the operators (``operators/prompts/``): a stable
   prefix (task description, data profile, solution contract, what earlier runs on similar data
   found (mcgs.experience), retrieved knowledge entries)
   sent as the cached system block, then the operator's variable part (parent code and
   outcome, siblings, references from other branches, remaining time).
2. **Model** by the cascade of BudgetMLAgent (Gandhi, Patwardhan, Vig & Gupta, 2024): the cheap
   model writes; after ``escalate_after`` consecutive failed nodes on the parent's chain the
   strong model writes the fix; a valid parent brings the cheap model back. On stagnation
   (Evolve, Fusion, Aggregate) the strong model is first asked for a plan ("ask the expert"),
   at most ``max_expert_calls`` times per run. The rule reads only the graph and the ledger,
   so a resumed run continues it.
3. **Budget**: before every call the worst case of that call (prompt priced as cache writes,
   plus ``max_tokens`` of output) is added to what the ledger says the run has spent; if that
   would pass ``max_cost_usd`` the call is not made, and the recipe coder writes the node (or
   the run stops, ``on_budget_spent="stop"``).
4. **Failures** (:mod:`mcgs.llm.client`): transient errors are the SDK's retries; a prompt over
   the context window is shrunk once (fewer references, shorter logs, no sibling list); a
   malformed answer, or a program the graph already has (:func:`~mcgs.coders.program_key`
   in ``CoderRequest.tried``, or the code of a node the prompt shows, whoever wrote it: a Debug
   answer that returns the failed program, say), is
   re-asked ``max_reasks`` times; after that, or on any API failure, the
   recipe coder writes this node and the run goes on. Authentication and unknown-model errors
   switch the LLM off for the rest of the run.

Every call is a ledger row (:meth:`mcgs.storage.Storage.add_llm_call`); every node's config
says who wrote it (``author``: the model, or ``recipe (fallback: why)``). Task facts (metric,
direction, columns) come from the TaskSpec, never from the model.
"""

from __future__ import annotations

import ast
import dataclasses
import json
import logging
import math
import os
import re
from pathlib import Path
from typing import Any, Callable, Literal

from pydantic import BaseModel, Field, model_validator

from mcgs.coders import Coder, CoderAnswer, CoderRequest, CoderStop, config_key, program_key
from mcgs import operators
from mcgs.node import FrozenNode, Operator
from mcgs.settings import SearchSettings

__all__ = ["AnthropicCoder", "SolutionAnswer", "ExpertPlan", "prompt_environment", "chain_failures"]

logger = logging.getLogger(__name__)

_TIERS = ("parameters", "features", "strategy")
_STAGNATION_OPERATORS = (Operator.EVOLVE, Operator.FUSION, Operator.AGGREGATE)
CHARS_PER_TOKEN = 3.0  # conservative (English prose is ~4, code ~3.5): the budget over-estimates



#: Per-column maps of the data profile, and how many of their columns a prompt shows.
_PER_COLUMN = ("columns", "missing", "cardinality", "drift")
PROMPT_COLUMNS = 40


def compact_profile(profile: dict[str, Any], max_columns: int = PROMPT_COLUMNS) -> dict[str, Any]:
    """The data profile as a prompt shows it: each per-column map (kinds, missing shares,
    cardinalities, drift) keeps its first ``max_columns`` columns and says how many more there
    are (and, for the kinds, how many of each), so a wide table (Cora's 1 433 word columns) leaves
    room for the rest of the profile (its graph, its target) within the prompt's size."""
    from collections import Counter

    out = dict(profile)
    for key in _PER_COLUMN:
        values = profile.get(key)
        if isinstance(values, dict) and len(values) > max_columns:
            kept = dict(list(values.items())[:max_columns])
            rest = len(values) - max_columns
            kept["..."] = (f"{rest} more columns: " + ", ".join(f"{n} {k}" for k, n in Counter(list(values.values())[max_columns:]).most_common())
                           if key == "columns" else f"{rest} more columns")
            out[key] = kept
    return out

class SolutionAnswer(BaseModel):
    """The ``write_solution`` tool input: a plan and a complete program."""

    plan: str = Field(min_length=1, description="What the program does and why, a few sentences.")
    code: str = Field(min_length=20, description="The complete Python program.")
    knowledge_ids: list[str] = Field(default_factory=list, description="Ids of the knowledge entries used.")


class ReviewVerdict(BaseModel):
    """The ``review`` tool input of the Code Review operator's model review: pass, or the
    problems with a revised program (required with ``revise``)."""

    verdict: Literal["pass", "revise"] = Field(description="revise only for a concrete defect, with the revised program")
    problems: list[str] = Field(default_factory=list, description="The defects found (one sentence each), or what was checked.")
    revised_code: str | None = Field(None, description="With revise: the complete program with every problem fixed.")

    @model_validator(mode="after")
    def _revision_given(self) -> "ReviewVerdict":
        if self.verdict == "revise" and (not self.revised_code or len(self.revised_code.strip()) < 20):
            raise ValueError("a revise verdict needs revised_code, the complete revised program")
        return self


class ExpertPlan(BaseModel):
    """The ``plan`` tool input of an ask-the-expert call."""

    plan: str = Field(min_length=1, description="A short concrete plan for the next program; no code.")


def prompt_environment():
    """Jinja2 environment over ``operators/prompts`` (strict about undefined names)."""
    import jinja2

    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(Path(operators.__file__).parent / "prompts")),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["workspace_paths"] = workspace_paths
    return env


# a node's (or a screened plan's) workspace, as an absolute path: what a traceback prints
_WORKSPACE_PATH = re.compile(r"(?<=[\"'])/[^\"'\n]*?/(?:nodes/\d{5}|screen/plan_\d+)/"  # quoted, spaces allowed
                             r"|(?<![^\s(=:,])/[^\s\"']*?/(?:nodes/\d{5}|screen/plan_\d+)/")


def workspace_paths(text: str) -> str:
    """``text`` (an error or log tail) with host paths made relative to the workspace, as the
    program sees its files: ``/runs/a/nodes/00012/solution.py`` -> ``solution.py``, and the
    interpreter's own folders (the virtual environment, site-packages) -> ``<python>``. The model
    needs neither the run folder nor the engine's paths to fix a program."""
    import sys

    text = _WORKSPACE_PATH.sub("", text or "")
    for prefix in sorted({sys.prefix, sys.base_prefix, sys.exec_prefix, os.path.realpath(sys.prefix), os.path.realpath(sys.base_prefix)},
                         key=len, reverse=True):
        text = text.replace(prefix.rstrip("/") + "/", "<python>/")
    return text


def chain_failures(req: CoderRequest) -> int:
    """Consecutive failed nodes ending at the request's parent: the parent, then its primary
    ancestors nearest first, until the first valid one (0 when the parent is valid or absent)."""
    count = 0
    for n in (req.parent, *req.lineage):
        if n is None or not n.state.is_failure():
            break
        count += 1
    return count


def _estimate_tokens(*texts: str) -> int:
    return math.ceil(sum(len(t) for t in texts) / CHARS_PER_TOKEN)


def _shown_programs(request: CoderRequest) -> dict[str, int]:
    """:func:`~mcgs.coders.program_key` -> sequence number of the nodes whose code the prompt
    shows (parent, siblings, references). ``request.tried`` knows LLM programs by their key
    only; a node the recipe coder wrote (a fallback, a baseline) is keyed by its config there,
    so a Debug answer that returns such a parent unchanged would otherwise run again."""
    shown: dict[str, int] = {}
    for n in (request.parent, *request.siblings, *request.references):
        if n is not None and n.code:
            key = program_key(n.code)
            if key is not None:
                shown.setdefault(key, n.seq)
    return shown


class AnthropicCoder:
    """Programs from Claude with the recipe coder as fallback (module docstring).

    Args:
        settings: The search settings (``llm`` holds the models, budget and failure policy).
        fallback: Coder that writes a node when the LLM cannot (the recipe coder).
        client: An :class:`~mcgs.llm.AnthropicClient` or :class:`~mcgs.llm.OpenAIClient`
            (default: the provider's, built from settings on first use).
        provider: ``anthropic`` (the Messages API) or ``openai`` (an OpenAI-compatible server):
            the client it builds, the ``coder`` its nodes record, and whether models missing from
            the price list are free (a local server's: :func:`mcgs.llm.unknown_models_free`).

    Call :meth:`attach` before use so the coder can write the ledger.
    """

    def __init__(self, settings: SearchSettings, fallback: Coder, client: Any | None = None, provider: str = "anthropic"):
        from mcgs.llm import unknown_models_free

        self.settings = settings
        self.llm = settings.llm
        self.fallback = fallback
        self.name = provider
        self._free_unknown = unknown_models_free(provider, settings.llm)
        self._client = client
        self._disabled: str | None = None  # why the LLM is off for the rest of the run
        self._storage = None
        self._run_id: int | None = None
        self._remaining: Callable[[], float] = lambda: settings.time_budget_s
        self._ledger_ids: list[int] = []  # ledger rows of the answer being written (CoderAnswer.ledger_ids)

    # ------------------------------------------------------------------ wiring

    def attach(self, storage, run_id: int, remaining_s: Callable[[], float]) -> None:
        """Give the coder the run's ledger and a clock (called by the search)."""
        self._storage, self._run_id, self._remaining = storage, run_id, remaining_s

    def _get_client(self):
        if self._client is None:
            from mcgs.llm import make_client

            self._client = make_client(self.name, self.llm)
        return self._client

    def _record(self, req: CoderRequest, kind: str, model: str, usage, outcome: str, error: str | None = None) -> None:
        if self._storage is None:
            return
        call = ledger_row(self.llm, req.operator.value, kind, model, usage, node_seq=req.node_seq, outcome=outcome, error=error, provider=self.name)
        self._ledger_ids.append(self._storage.add_llm_call(self._run_id, call))

    def spent_usd(self) -> float:
        """What the run's calls have cost so far (from the ledger, so it survives a resume)."""
        return self._storage.llm_spend_usd(self._run_id) if self._storage is not None else 0.0

    def _affordable(self, model: str, system: str, user: str) -> bool:
        if self.llm.max_cost_usd is None:
            return True
        worst = self.llm.price(model, self._free_unknown).cost(0, self.llm.max_tokens, cache_write_tokens=_estimate_tokens(system, user))
        return self.spent_usd() + worst <= self.llm.max_cost_usd

    # ------------------------------------------------------------------ prompts

    def model_for(self, req: CoderRequest) -> str:
        """The cascade: the strong model after ``escalate_after`` consecutive failures on the
        parent's chain, else the cheap one."""
        return self.llm.strong_model if chain_failures(req) >= self.llm.escalate_after else self.llm.cheap_model

    def _knowledge(self, req: CoderRequest) -> list:
        from mcgs.knowledge_base import rank_entries

        ranked = rank_entries(req.profile, req.task.description or "", top_k=8)
        return [e for e, _ in ranked]

    def system_prompt(self, req: CoderRequest) -> str:
        """The stable prefix: identical for every call of a run (so it is cached)."""
        from mcgs.contract import CONTRACT_VERSION

        profile = compact_profile({k: v for k, v in req.profile.items() if k not in ("version",)})
        profile_text = json.dumps(profile, indent=1, default=str)
        if len(profile_text) > 12000:
            profile_text = profile_text[:12000] + "\n... (profile cut)"
        task = req.task
        return prompt_environment().get_template("_prefix.j2").render(
            contract_version=CONTRACT_VERSION,
            task=task,
            description=(task.description or "(no description)")[:8000],
            profile_text=profile_text,
            knowledge=self._knowledge(req),
            train_only_columns=list(req.profile.get("train_only_columns", ())),
            experience=req.experience.summary() if req.experience is not None else "",
        )

    def user_prompt(self, req: CoderRequest, *, shrink: bool = False, expert_plan: str | None = None, note: str | None = None) -> str:
        """The operator's variable part. ``shrink`` keeps one reference, no siblings or
        lineage, and shorter logs (after a context-length error)."""
        max_log = self.llm.max_log_chars // (4 if shrink else 1)
        text = prompt_environment().get_template(operators.PROMPTS[req.operator]).render(
            parent=req.parent,
            siblings=() if shrink else req.siblings,
            lineage=() if shrink else req.lineage[:3],
            references=req.references[:1] if shrink else req.references,
            tier=req.tier,
            tier_name=_TIERS[min(req.tier, 2)],
            timeout_s=req.per_run_timeout_s,
            threads=max(1, self.settings.cpu_threads // self.settings.workers),
            remaining_s=max(0.0, self._remaining()),
            max_log=max_log,
            expert_plan=expert_plan,
        )
        if note:
            text += f"\n\nYour previous answer could not be used: {note}. Answer again with the tool."
        return text

    # ------------------------------------------------------------------ writing

    def write(self, request: CoderRequest) -> CoderAnswer:
        """A program for the request (see the module docstring for the policy).

        The answer's ``ledger_ids`` are the ledger rows of its calls, so the engine can give them
        the node's number when the request had none (a draft plan written for screening).

        Raises:
            CoderStop: the spending limit is reached and ``on_budget_spent="stop"``.
        """
        self._ledger_ids = []
        answer = self._write(request)
        return dataclasses.replace(answer, ledger_ids=tuple(self._ledger_ids))

    def _write(self, request: CoderRequest) -> CoderAnswer:
        if self._disabled:
            return self._fall_back(request, self._disabled)
        try:
            client = self._get_client()
        except Exception as exc:  # LLMUnavailable(fatal): no key or no SDK
            self._disabled = str(exc)
            logger.warning("the LLM coder is off for this run: %s", exc)
            return self._fall_back(request, self._disabled)
        from mcgs.llm import LLMUnavailable, MalformedAnswer, PromptTooLong

        system = self.system_prompt(request)
        expert_plan = self._ask_expert(client, request, system)
        model = self.model_for(request)
        shrink, note, kind = False, None, "code"
        attempts_left = 1 + self.llm.max_reasks
        shown = _shown_programs(request)
        while attempts_left > 0:
            user = self.user_prompt(request, shrink=shrink, expert_plan=expert_plan, note=note)
            if not self._affordable(model, system, user):
                return self._budget_spent(request, model)
            try:
                ans, usage = client.ask(
                    model=model,
                    system=system,
                    user=user,
                    answer=SolutionAnswer,
                    tool_name="write_solution",
                    tool_description="Return the plan and the complete Python program for this node.",
                    max_tokens=self.llm.max_tokens,
                )
            except PromptTooLong as exc:
                self._record(request, kind, model, exc.usage, "error", str(exc))
                if shrink:
                    return self._fall_back(request, "the prompt is too long even when shrunk")
                shrink = True
                continue
            except MalformedAnswer as exc:
                self._record(request, kind, model, exc.usage, "malformed", str(exc))
                attempts_left -= 1
                note, kind = str(exc), "reask"
                continue
            except LLMUnavailable as exc:
                self._record(request, kind, model, exc.usage, "error", str(exc))
                if exc.fatal:
                    self._disabled = str(exc)
                    logger.warning("the LLM coder is off for this run: %s", exc)
                return self._fall_back(request, str(exc))
            key = program_key(ans.code)  # None: the code does not parse
            problem = _code_problem(ans.code) if key is None else None
            if problem:
                self._record(request, kind, model, usage, "malformed", problem)
                attempts_left -= 1
                note, kind = problem, "reask"
                continue
            seen = request.tried.get(config_key({"program": key}), shown.get(key))
            if seen is not None:  # e.g. a Debug answer that gives the failed program back
                problem = f"it is node {seen}'s program again (the same code up to comments and formatting), whose result the search already has; change what your plan says to change"
                self._record(request, kind, model, usage, "repeat", problem)
                attempts_left -= 1
                note, kind = problem, "reask"
                continue
            self._record(request, kind, model, usage, "ok")
            config: dict[str, Any] = {"author": model, "coder": self.name, "program": key}
            if expert_plan:
                config["expert_plan"] = expert_plan
            known = _known_ids(ans.knowledge_ids)
            return CoderAnswer(plan=ans.plan.strip(), code=ans.code, config=config, knowledge_ids=known)
        return self._fall_back(request, f"no valid answer after {1 + self.llm.max_reasks} attempt(s): {note}")

    def review_program(self, code: str, req: CoderRequest) -> dict[str, Any] | None:
        """The Code Review operator's model review of a program the model wrote and the static
        review passed (``llm.model_review``, on by default): the cheap model reads it with the
        task, the contract, the data profile and the node's timeout (``code_review.j2``) and
        answers ``pass``, or ``revise`` with the problems and a revised program.

        Returns:
            ``{"verdict": "pass" | "revise" | "unavailable", "problems": [...], "model": ...,
            "revised_code": ... (with revise), "error": ... (unavailable)}``; None when not asked
            (setting off, LLM off, a program the recipe coder wrote). A malformed answer is
            re-asked ``max_reasks`` times; after that, or when the call fails or the budget
            cannot cover it, the verdict is ``unavailable`` and the program runs on the static
            review alone.
        """
        from mcgs.llm import LLMError, MalformedAnswer

        if not self.llm.model_review or self._disabled:
            return None
        model = self.llm.cheap_model
        try:
            client = self._get_client()
        except LLMError as exc:
            return {"verdict": "unavailable", "problems": [], "model": model, "error": str(exc)}
        system = self.system_prompt(req)
        note = None
        for _ in range(1 + self.llm.max_reasks):
            user = prompt_environment().get_template("code_review.j2").render(code=code, timeout_s=req.per_run_timeout_s, note=note)
            if not self._affordable(model, system, user):
                return {"verdict": "unavailable", "problems": [], "model": model, "error": "the LLM budget cannot cover the review"}
            try:
                ans, usage = client.ask(model=model, system=system, user=user, answer=ReviewVerdict, tool_name="review",
                                        tool_description="Pass the program, or give its problems and the revised program.",
                                        max_tokens=self.llm.max_tokens)
            except MalformedAnswer as exc:
                self._record(req, "review", model, exc.usage, "malformed", str(exc))
                note = f"your last answer could not be used: {exc}"
                continue
            except LLMError as exc:
                self._record(req, "review", model, exc.usage, "error", str(exc))
                return {"verdict": "unavailable", "problems": [], "model": model, "error": str(exc)}
            problem = _code_problem(ans.revised_code) if ans.verdict == "revise" else None
            if problem is not None:
                self._record(req, "review", model, usage, "malformed", f"the revised program: {problem}")
                note = f"your revised program could not be used: {problem}"
                continue
            self._record(req, "review", model, usage, "ok")
            out = {"verdict": ans.verdict, "problems": list(ans.problems), "model": model}
            if ans.verdict == "revise":
                out["revised_code"] = ans.revised_code
            return out
        return {"verdict": "unavailable", "problems": [], "model": model, "error": f"no valid review after {1 + self.llm.max_reasks} attempt(s): {note}"}

    def _side_call(self, client, req: CoderRequest, kind: str, model: str, system: str, user: str, answer, description: str, max_tokens: int):
        """One call that is not the node's program (an expert plan, tool ``plan``): skipped when
        the budget cannot cover it, recorded in the ledger; the validated answer or None."""
        from mcgs.llm import LLMError

        if not self._affordable(model, system, user):
            return None
        try:
            ans, usage = client.ask(
                model=model, system=system, user=user, answer=answer, tool_name="plan",
                tool_description=description, max_tokens=min(max_tokens, self.llm.max_tokens),
            )
        except LLMError as exc:
            self._record(req, kind, model, exc.usage, "error", str(exc))
            return None
        self._record(req, kind, model, usage, "ok")
        return ans

    def _ask_expert(self, client, req: CoderRequest, system: str) -> str | None:
        """A planning call to the strong model when the search is stagnant (BudgetMLAgent's
        "ask the expert"), at most ``max_expert_calls`` per run; None when not asked or failed."""

        if req.operator not in _STAGNATION_OPERATORS or self.llm.max_expert_calls <= 0 or self._storage is None:
            return None
        if sum(1 for c in self._storage.llm_calls(self._run_id) if c.kind == "expert") >= self.llm.max_expert_calls:
            return None
        model = self.llm.strong_model
        user = prompt_environment().get_template("expert.j2").render(
            reason=req.reason or req.operator.value,
            references=req.references[:5],
            parent=req.parent,
            timeout_s=req.per_run_timeout_s,
            max_log=self.llm.max_log_chars // 2,
        )
        ans = self._side_call(client, req, "expert", model, system, user, ExpertPlan, "Return a short plan for the next program.", 2048)
        return None if ans is None else ans.plan.strip()

    def _budget_spent(self, req: CoderRequest, model: str) -> CoderAnswer:
        spent = self.spent_usd()
        from mcgs.settings import format_usd

        msg = (f"LLM budget of {format_usd(self.llm.max_cost_usd)} reached (spent {format_usd(spent)}; the next {model} call "
               f"could cost more)")
        self._record(req, "code", model, None, "budget", msg)
        if self.llm.on_budget_spent == "stop":
            raise CoderStop(msg)
        self._disabled = msg
        return self._fall_back(req, msg)

    def _fall_back(self, req: CoderRequest, why: str) -> CoderAnswer:
        """The recipe coder writes this node (it drafts afresh when the parent is an LLM
        program it cannot read)."""
        ans = self.fallback.write(req)
        config = {**ans.config, "author": f"recipe (fallback: {why[:200]})"}
        return dataclasses.replace(ans, config=config)


def ledger_row(llm, operator: str, kind: str, model: str, usage, *, node_seq: int | None = None, outcome: str = "ok", error: str | None = None,
               provider: str = "anthropic"):
    """The cost-ledger row (:class:`mcgs.storage.LLMCall`) of one call: its billed tokens from
    ``usage`` (a :class:`mcgs.llm.CallUsage`, or None when nothing was billed) priced by
    ``llm.prices`` (US dollars; a model the prices lack is free on the ``provider``'s local
    server: :func:`mcgs.llm.unknown_models_free`)."""
    from mcgs.llm import unknown_models_free
    from mcgs.storage import LLMCall

    free_unknown = unknown_models_free(provider, llm)

    call = LLMCall(operator=operator, model=model, kind=kind, node_seq=node_seq, outcome=outcome, error=error)
    if usage is None:
        return call
    return dataclasses.replace(
        call,
        input_tokens=usage.input_tokens,
        output_tokens=usage.output_tokens,
        cache_write_tokens=usage.cache_write_tokens,
        cache_read_tokens=usage.cache_read_tokens,
        latency_s=round(usage.latency_s, 3),
        request_id=usage.request_id,
        cost_usd=llm.price(model, free_unknown).cost(usage.input_tokens, usage.output_tokens, usage.cache_write_tokens, usage.cache_read_tokens),
    )


def _code_problem(code: str) -> str | None:
    """Why a returned program cannot be used as is (it does not parse), or None."""
    try:
        ast.parse(code)
    except SyntaxError as exc:
        return f"the code does not parse: line {exc.lineno}: {exc.msg}"
    return None


def _known_ids(ids: list[str]) -> tuple[str, ...]:
    from mcgs.knowledge_base import load_entries

    known = {e.id for e in load_entries()}
    return tuple(i for i in ids if i in known)


def is_llm_node(n: FrozenNode) -> bool:
    """True when a model (not the recipe coder) wrote the node."""
    from mcgs.llm import PROVIDERS

    return n.config.get("coder") in PROVIDERS

