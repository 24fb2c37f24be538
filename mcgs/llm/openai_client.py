"""The OpenAI-compatible adapter: vLLM, Ollama, llama.cpp's server and hosted OpenAI-compatible
APIs through the official ``openai`` client, with :class:`~mcgs.llm.AnthropicClient`'s contract
(one structured call, its usage, the same typed failures), so the coder, its cascade, budget,
ledger and fallback work unchanged.

Structured answers:

* **tool calling** where the server has it: one function whose ``parameters`` are the answer
  model's JSON schema, forced with ``tool_choice``; its ``arguments`` are validated by that model;
* **JSON output** otherwise: a server that refuses tools (a 400/422 naming them, or an answer
  that ignores them and writes text) is asked from then on with ``response_format={"type":
  "json_object"}`` and the schema in the system message; the message content is parsed as JSON
  and validated the same way. The switch is remembered for the client's life.

Failure policy as the Anthropic adapter's: the SDK retries 408/409/429/5xx, timeouts and
connection errors (``max_retries``), then :class:`LLMUnavailable`; authentication, permission and
unknown-model errors are fatal; a context-length error is :class:`PromptTooLong`; no tool call,
``finish_reason == "length"``, invalid JSON or a failed validation is :class:`MalformedAnswer`.

Keys: ``OPENAI_API_KEY`` from the engine's environment (never passed to candidates: the sandbox
drops every variable named like a key); a local server (``base_url`` on this machine or a
private network) needs none. Usage: ``prompt_tokens`` (less ``prompt_tokens_details.cached_tokens``,
counted as cache reads) and ``completion_tokens``.
"""

from __future__ import annotations

import ipaddress
import json
import os
import time
from typing import Any, TypeVar
from urllib.parse import urlparse

from pydantic import BaseModel, ValidationError

from mcgs.llm.client import CallUsage, LLMUnavailable, MalformedAnswer, PromptTooLong, request_id_of
from mcgs.settings import LLMSettings

__all__ = ["OpenAIClient", "is_local_url"]

T = TypeVar("T", bound=BaseModel)
#: What a local server is asked with when no key is set (the SDK requires one; local servers ignore it).
LOCAL_KEY = "not-needed"


def is_local_url(url: str | None) -> bool:
    """Whether ``url``'s host is this machine or a private network (a self-hosted server: vLLM,
    Ollama, llama.cpp), by name (``localhost``, ``*.local``, ``*.internal``) or address."""
    if not url:
        return False
    host = (urlparse(url).hostname or "").lower()
    if host in ("localhost",) or host.endswith((".local", ".localhost", ".internal", ".lan")):
        return True
    try:
        addr = ipaddress.ip_address(host)
    except ValueError:
        return False
    return addr.is_loopback or addr.is_private or addr.is_link_local


def _is_context_error(exc: Any) -> bool:
    body = getattr(exc, "body", None)
    code = (body.get("code") if isinstance(body, dict) else None) or getattr(exc, "code", None) or ""
    text = str(getattr(exc, "message", None) or exc).lower()
    return str(code).lower() in ("context_length_exceeded", "string_above_max_length") or any(
        w in text for w in ("context length", "context_length", "maximum context", "too many tokens", "prompt is too long", "context window"))


def _refuses_tools(exc: Any) -> bool:
    text = str(getattr(exc, "message", None) or exc).lower()
    return any(w in text for w in ("tool", "function call", "function_call")) and any(
        w in text for w in ("not support", "unsupported", "not enabled", "not available", "unknown", "invalid", "does not"))


def _usage(model: str, completion: Any, latency: float) -> CallUsage:
    u = getattr(completion, "usage", None)
    prompt = int(getattr(u, "prompt_tokens", 0) or 0)
    details = getattr(u, "prompt_tokens_details", None)
    cached = int(getattr(details, "cached_tokens", 0) or 0)
    return CallUsage(model=model, input_tokens=max(0, prompt - cached), output_tokens=int(getattr(u, "completion_tokens", 0) or 0),
                     cache_read_tokens=cached, latency_s=latency, request_id=getattr(completion, "_request_id", None) or getattr(completion, "id", None))


class OpenAIClient:
    """Structured calls to an OpenAI-compatible chat completions API (module docstring).

    Args:
        settings: Models are chosen per call by the caller; this uses ``base_url``,
            ``max_retries`` and ``request_timeout_s``.
        api_key: The key (default: ``OPENAI_API_KEY``; a local ``base_url`` needs none).

    Attributes:
        local: The server is on this machine or a private network (its models cost nothing
            unless the settings price them).
        tools: Whether structured answers still use tool calling (False once the server
            refused it).

    Raises:
        LLMUnavailable: (fatal) the ``openai`` package is missing, or no key for a hosted API.
    """

    def __init__(self, settings: LLMSettings, api_key: str | None = None):
        try:
            import openai
        except ImportError as exc:  # pragma: no cover - openai is a dependency
            raise LLMUnavailable("the openai package is not installed: pip install openai", fatal=True) from exc
        base_url = settings.base_url or os.environ.get("OPENAI_BASE_URL")
        self.local = is_local_url(base_url)
        key = api_key or os.environ.get("OPENAI_API_KEY") or (LOCAL_KEY if self.local else None)
        if not key:
            raise LLMUnavailable("OPENAI_API_KEY is not set: export it, point MCGS_LLM__BASE_URL at a local server "
                                 "(vLLM, Ollama, llama.cpp), or run with --coder recipe", fatal=True)
        self._openai = openai
        self._client = openai.OpenAI(api_key=key, base_url=base_url, max_retries=settings.max_retries, timeout=settings.request_timeout_s)
        self.tools = True

    @property
    def max_retries(self) -> int:
        return self._client.max_retries

    def ask(self, *, model: str, system: str, user: str, answer: type[T], tool_name: str, tool_description: str,
            max_tokens: int) -> tuple[T, CallUsage]:
        """One call whose answer is validated by ``answer`` (arguments as
        :meth:`mcgs.llm.AnthropicClient.ask`).

        Raises:
            LLMUnavailable, PromptTooLong, MalformedAnswer: see the module docstring.
        """
        if self.tools:
            try:
                return self._call(model, system, user, answer, tool_name, tool_description, max_tokens, tools=True)
            except _NoTools:
                self.tools = False
        return self._call(model, system, user, answer, tool_name, tool_description, max_tokens, tools=False)

    def _call(self, model, system, user, answer, tool_name, tool_description, max_tokens, *, tools: bool):
        o = self._openai
        t0 = time.monotonic()
        schema = answer.model_json_schema()

        def failed(exc) -> CallUsage:
            return CallUsage(model=model, latency_s=time.monotonic() - t0, request_id=request_id_of(exc, "x-request-id"))

        kwargs: dict[str, Any] = {"model": model, "max_tokens": max_tokens}
        if tools:
            kwargs["messages"] = [{"role": "system", "content": system}, {"role": "user", "content": user}]
            kwargs["tools"] = [{"type": "function", "function": {"name": tool_name, "description": tool_description, "parameters": schema}}]
            kwargs["tool_choice"] = {"type": "function", "function": {"name": tool_name}}
        else:
            instruction = (f"\n\nAnswer with one JSON object only ({tool_name}: {tool_description}), no prose and no code fences, "
                           f"that validates against this JSON schema:\n{json.dumps(schema)}")
            kwargs["messages"] = [{"role": "system", "content": system + instruction}, {"role": "user", "content": user}]
            kwargs["response_format"] = {"type": "json_object"}
        try:
            completion = self._client.chat.completions.create(**kwargs)
        except (o.AuthenticationError, o.PermissionDeniedError) as exc:
            raise LLMUnavailable(f"the server refused the key ({exc.status_code}): check OPENAI_API_KEY", failed(exc), fatal=True) from exc
        except o.NotFoundError as exc:
            raise LLMUnavailable(f"model {model!r} (or the endpoint) was not found (404) at {self._client.base_url}: "
                                 f"set another model in the llm settings", failed(exc), fatal=True) from exc
        except (o.BadRequestError, o.UnprocessableEntityError) as exc:
            if _is_context_error(exc):
                raise PromptTooLong(f"prompt too long for {model}: {getattr(exc, 'message', exc)}", failed(exc)) from exc
            if tools and _refuses_tools(exc):
                raise _NoTools() from exc
            raise LLMUnavailable(f"the server rejected the request ({exc.status_code}): {getattr(exc, 'message', exc)}", failed(exc)) from exc
        except o.APIStatusError as exc:  # 429 / 5xx after the SDK's retries
            raise LLMUnavailable(f"the server kept failing ({exc.status_code}) after {self._client.max_retries} retries", failed(exc)) from exc
        except o.APIConnectionError as exc:  # includes timeouts
            raise LLMUnavailable(f"could not reach {self._client.base_url}: {exc}", failed(exc)) from exc
        usage = _usage(model, completion, time.monotonic() - t0)
        if not completion.choices:
            raise MalformedAnswer("the answer had no choices", usage)
        choice = completion.choices[0]
        if choice.finish_reason == "length":
            raise MalformedAnswer(f"the answer was cut off at max_tokens={max_tokens}", usage)
        message = choice.message
        if tools:
            call = next((c for c in (message.tool_calls or []) if getattr(c, "function", None) and c.function.name == tool_name), None)
            if call is None:
                if message.content and not message.tool_calls and _looks_like_json(message.content):
                    raw = message.content  # a server that ignores tools but answered with the object itself
                else:
                    if not message.tool_calls:  # the server ignores tools: the re-ask asks for JSON output
                        self.tools = False
                    raise MalformedAnswer(f"the answer did not call the {tool_name} function (finish reason {choice.finish_reason})", usage)
            else:
                raw = call.function.arguments
        else:
            raw = message.content or ""
        try:
            data = json.loads(_strip_fences(raw))
        except ValueError as exc:
            raise MalformedAnswer(f"the {tool_name} answer is not JSON: {exc}", usage) from exc
        try:
            return answer.model_validate(data), usage
        except ValidationError as exc:
            raise MalformedAnswer(f"the {tool_name} answer did not validate: {exc.errors()[0].get('msg')} at {exc.errors()[0].get('loc')}",
                                  usage) from exc


class _NoTools(Exception):
    """The server does not do tool calling: ask again with JSON output."""


def _strip_fences(text: str) -> str:
    t = text.strip()
    if t.startswith("```"):
        t = t.split("\n", 1)[1] if "\n" in t else ""
        t = t.rsplit("```", 1)[0]
    return t.strip()


def _looks_like_json(text: str) -> bool:
    return _strip_fences(text).startswith("{")
