"""The Anthropic adapter: one structured call, its usage, and typed failures.

Structured answers use a forced tool call (``tool_choice={"type": "tool", ...}``) whose
``input_schema`` is a pydantic model's JSON schema; the tool input is validated by that model,
never parsed out of prose. Sampling parameters are not sent (current models fix them). Calls
are non-streaming: ``max_tokens`` is capped by :class:`~mcgs.settings.LLMSettings` below the
SDK's non-streaming limit.

Failure policy (DESIGN §5, issue 6):

* transient errors — 408/409/429 (honouring ``retry-after``), 5xx, 529 overloaded, timeouts
  and connection errors — are retried by the SDK itself (``max_retries``); when its retries are
  spent the call raises :class:`LLMUnavailable` (``fatal=False``: the next node tries again);
* authentication, permission and model-not-found errors raise :class:`LLMUnavailable` with
  ``fatal=True`` at once (the coder stops calling for the rest of the run);
* a prompt over the model's context window raises :class:`PromptTooLong` (the coder shrinks
  the prompt once);
* an answer without the tool call, cut off at ``max_tokens``, or failing validation raises
  :class:`MalformedAnswer` (the coder re-asks a bounded number of times).

Every outcome carries the call's :class:`CallUsage`: what the API billed (so the cost ledger
counts malformed answers too), and for a failed call its latency and the provider's request id
with no tokens (none were billed).
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from mcgs.settings import LLMSettings

__all__ = ["AnthropicClient", "CallUsage", "LLMError", "LLMUnavailable", "MalformedAnswer", "PromptTooLong"]

T = TypeVar("T", bound=BaseModel)


@dataclasses.dataclass(frozen=True)
class CallUsage:
    """Tokens billed for one call, its latency and the provider's request id.

    ``input_tokens`` excludes the cache tokens, as in the Messages API's ``usage``.
    """

    model: str
    input_tokens: int = 0
    output_tokens: int = 0
    cache_write_tokens: int = 0
    cache_read_tokens: int = 0
    latency_s: float = 0.0
    request_id: str | None = None


class LLMError(Exception):
    """A call did not produce a usable answer.

    Attributes:
        usage: The call's :class:`CallUsage`: what it was billed, and for a call the API failed
            its latency and request id with no tokens; None when no request was sent.
    """

    def __init__(self, message: str, usage: CallUsage | None = None):
        super().__init__(message)
        self.usage = usage


class LLMUnavailable(LLMError):
    """The API could not answer. ``fatal`` is True for errors that will not go away during the
    run (authentication, permission, unknown model)."""

    def __init__(self, message: str, usage: CallUsage | None = None, *, fatal: bool = False):
        super().__init__(message, usage)
        self.fatal = fatal


class PromptTooLong(LLMError):
    """The prompt does not fit the model's context window."""


class MalformedAnswer(LLMError):
    """The model answered, but not with a valid structured answer."""


def _usage(model: str, msg: Any, latency: float) -> CallUsage:
    u = msg.usage
    return CallUsage(
        model=model,
        input_tokens=int(u.input_tokens or 0),
        output_tokens=int(u.output_tokens or 0),
        cache_write_tokens=int(getattr(u, "cache_creation_input_tokens", 0) or 0),
        cache_read_tokens=int(getattr(u, "cache_read_input_tokens", 0) or 0),
        latency_s=latency,
        request_id=getattr(msg, "_request_id", None),
    )


def request_id_of(exc: Any, header: str = "request-id") -> str | None:
    """The provider's request id of a failed call (the SDK's ``request_id``, else its ``header``
    response header), when it answered."""
    rid = getattr(exc, "request_id", None)
    if rid:
        return str(rid)
    response = getattr(exc, "response", None)
    headers = getattr(response, "headers", None)
    return headers.get(header) if headers is not None else None


def _is_context_error(exc: Any) -> bool:
    code = (getattr(exc, "error_code", None) or "").lower()
    text = (getattr(exc, "api_message", None) or str(exc)).lower()
    return code in ("prompt_too_long", "context_length_exceeded", "request_too_large") or "prompt is too long" in text or "context window" in text


class AnthropicClient:
    """Structured calls to the Messages API through the official SDK.

    Args:
        settings: Models are chosen per call by the caller; this uses ``max_retries``,
            ``request_timeout_s`` and ``base_url``.
        api_key: The key (default: ``ANTHROPIC_API_KEY`` from the engine's environment; it is
            never passed to candidate programs).

    Raises:
        LLMUnavailable: (fatal) the ``anthropic`` package is missing or no key is available.
    """

    def __init__(self, settings: LLMSettings, api_key: str | None = None):
        import os

        try:
            import anthropic
        except ImportError as exc:  # pragma: no cover - anthropic is a dependency
            raise LLMUnavailable("the anthropic package is not installed: pip install anthropic", fatal=True) from exc
        key = api_key or os.environ.get("ANTHROPIC_API_KEY")
        if not key:
            raise LLMUnavailable("ANTHROPIC_API_KEY is not set: export it, or run with --coder recipe", fatal=True)
        self._anthropic = anthropic
        self._client = anthropic.Anthropic(
            api_key=key,
            base_url=settings.base_url,
            max_retries=settings.max_retries,
            timeout=settings.request_timeout_s,
        )

    def ask(
        self,
        *,
        model: str,
        system: str,
        user: str,
        answer: type[T],
        tool_name: str,
        tool_description: str,
        max_tokens: int,
    ) -> tuple[T, CallUsage]:
        """One call whose answer is the input of a forced tool call, validated by ``answer``.

        Args:
            model: Model name (a setting).
            system: The stable prefix (task, data profile, contract, knowledge); sent as one
                system block marked for prompt caching (``cache_control: ephemeral``), so the
                cache breakpoint sits right after it.
            user: The variable part of the prompt.
            answer: Pydantic model of the tool input.
            tool_name, tool_description: The tool the model must call.
            max_tokens: Output limit.

        Returns:
            ``(validated answer, usage)``.

        Raises:
            LLMUnavailable, PromptTooLong, MalformedAnswer: see the module docstring.
        """
        a = self._anthropic
        t0 = time.monotonic()

        def failed(exc) -> CallUsage:  # not billed, but timed, with the id to quote to the provider
            return CallUsage(model=model, latency_s=time.monotonic() - t0, request_id=request_id_of(exc))

        try:
            msg = self._client.messages.create(
                model=model,
                max_tokens=max_tokens,
                system=[{"type": "text", "text": system, "cache_control": {"type": "ephemeral"}}],
                messages=[{"role": "user", "content": user}],
                tools=[{"name": tool_name, "description": tool_description, "input_schema": answer.model_json_schema()}],
                tool_choice={"type": "tool", "name": tool_name},
            )
        except (a.AuthenticationError, a.PermissionDeniedError) as exc:
            raise LLMUnavailable(f"the API refused the key ({exc.status_code}): check ANTHROPIC_API_KEY", failed(exc), fatal=True) from exc
        except a.NotFoundError as exc:
            raise LLMUnavailable(f"model {model!r} was not found (404): set another in the llm settings", failed(exc), fatal=True) from exc
        except (a.BadRequestError, a.ContentTooLargeError) as exc:
            if _is_context_error(exc):
                raise PromptTooLong(f"prompt too long for {model}: {getattr(exc, 'api_message', None) or exc}", failed(exc)) from exc
            raise LLMUnavailable(f"the API rejected the request ({exc.status_code}): {getattr(exc, 'api_message', None) or exc}",
                                 failed(exc)) from exc
        except a.APIStatusError as exc:  # 429 / 5xx / 529 after the SDK's retries
            raise LLMUnavailable(f"the API kept failing ({exc.status_code}) after {self._client.max_retries} retries", failed(exc)) from exc
        except a.APIConnectionError as exc:  # includes timeouts
            raise LLMUnavailable(f"could not reach the API: {exc}", failed(exc)) from exc
        except ValueError as exc:  # the SDK refuses the request itself (e.g. needs streaming)
            raise LLMUnavailable(f"the request was refused by the SDK: {exc}", failed(exc), fatal=True) from exc
        usage = _usage(model, msg, time.monotonic() - t0)
        if msg.stop_reason == "max_tokens":
            raise MalformedAnswer(f"the answer was cut off at max_tokens={max_tokens}", usage)
        block = next((b for b in msg.content if getattr(b, "type", None) == "tool_use" and b.name == tool_name), None)
        if block is None:
            raise MalformedAnswer(f"the answer did not call the {tool_name} tool (stop reason {msg.stop_reason})", usage)
        try:
            return answer.model_validate(block.input), usage
        except ValidationError as exc:
            raise MalformedAnswer(f"the {tool_name} call did not validate: {exc.errors()[0].get('msg')} at {exc.errors()[0].get('loc')}", usage) from exc
