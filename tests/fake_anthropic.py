"""A local fake of the Anthropic Messages API for tests (no network, no key).

A ``ThreadingHTTPServer`` on 127.0.0.1 answers ``POST /v1/messages`` with the real response
JSON: a message whose content is a ``tool_use`` block (or a text block, for malformed
answers), ``usage`` with the cache fields, a ``request-id`` header; or an error body
(``{"type": "error", "error": {...}}``) with its status and headers (``retry-after``). The real
SDK client talks to it through ``base_url``.

Responses come from a script (consumed in order), then from a ``default`` callable. Every
request is recorded (JSON body and headers) for the tests to inspect.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable

ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    404: "not_found_error",
    429: "rate_limit_error",
    500: "api_error",
    529: "overloaded_error",
}


def tool_reply(tool_input: dict[str, Any], usage: dict[str, int] | None = None) -> dict[str, Any]:
    """A successful answer calling the request's tool with ``tool_input``."""
    return {"kind": "tool", "input": tool_input, "usage": usage or {}}


def text_reply(text: str, usage: dict[str, int] | None = None) -> dict[str, Any]:
    """A malformed answer: prose, no tool call."""
    return {"kind": "text", "text": text, "usage": usage or {}}


def error_reply(status: int, message: str, headers: dict[str, str] | None = None) -> dict[str, Any]:
    """An API error with its status, ``error.type`` and headers."""
    return {"kind": "error", "status": status, "message": message, "headers": headers or {}}


def distinct_programs(code: str, plan: str, **fields: Any) -> Callable[..., dict[str, Any]]:
    """Reply builder answering ``code`` with a different last line each call: the coder
    re-asks a program the graph already has, so a fake that means "a new valid program each
    time" must not answer the same one twice."""
    count = iter(range(1_000_000))

    def reply(body: dict | None = None) -> dict[str, Any]:
        return tool_reply({"plan": plan, "code": code + f"\nVARIANT = {next(count)}\n", **fields})

    return reply


def next_reply(fake, body: dict, spent: dict[str, Any]) -> dict[str, Any]:
    """A fake server's next reply to ``body``: its script's next one, else its ``default``, else
    ``spent``; a callable reply is called with the request."""
    reply = fake.script.pop(0) if fake.script else fake.default if fake.default is not None else spent
    return reply(body) if callable(reply) else reply


def send_json(handler: BaseHTTPRequestHandler, status: int, headers: dict[str, str], body: Any) -> None:
    """Answer ``handler``'s request with ``body`` as JSON, the status and the headers."""
    data = json.dumps(body).encode()
    handler.send_response(status)
    for k, v in headers.items():
        handler.send_header(k, v)
    handler.send_header("content-length", str(len(data)))
    handler.end_headers()
    handler.wfile.write(data)


DEFAULT_USAGE = {"input_tokens": 1000, "output_tokens": 500, "cache_creation_input_tokens": 2000, "cache_read_input_tokens": 0}


class FakeAnthropic:
    """The fake server. Use as a context manager; ``base_url`` is what the client needs.

    Args:
        script: Replies served in order (``tool_reply``, ``text_reply``, ``error_reply``, or a
            callable ``(request_json) -> reply``).
        default: Reply builder used once the script is spent.
    """

    def __init__(self, script: list | None = None, default: Callable[[dict], dict] | None = None):
        self.script = list(script or [])
        self.default = default
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self.billed: list[dict[str, int]] = []  # usage of every reply that carried usage
        self._lock = threading.Lock()
        self._n = 0
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # quiet
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers.get("content-length", 0))) or b"{}")
                with fake._lock:
                    fake.requests.append(body)
                    fake.headers.append({k.lower(): v for k, v in self.headers.items()})
                    fake._n += 1
                    n = fake._n
                    if self.path.rstrip("/") != "/v1/messages":
                        reply = error_reply(404, f"no route {self.path}")
                    else:
                        reply = next_reply(fake, body, error_reply(500, "the fake's script is spent"))
                    if reply["kind"] != "error":
                        fake.billed.append({**DEFAULT_USAGE, **reply["usage"]})
                self._answer(body, reply, n)

            def _answer(self, body, reply, n):
                headers = {"content-type": "application/json", "request-id": f"req_fake_{n:04d}"}
                if reply["kind"] == "error":
                    status = reply["status"]
                    headers.update(reply["headers"])
                    out = {"type": "error", "error": {"type": ERROR_TYPES.get(status, "api_error"), "message": reply["message"]}}
                else:
                    status = 200
                    usage = {**DEFAULT_USAGE, **reply["usage"]}
                    if reply["kind"] == "tool":
                        tool = body.get("tool_choice", {}).get("name") or body["tools"][0]["name"]
                        content = [{"type": "tool_use", "id": f"toolu_{n:04d}", "name": tool, "input": reply["input"]}]
                        stop = "tool_use"
                    else:
                        content = [{"type": "text", "text": reply["text"]}]
                        stop = "end_turn"
                    out = {
                        "id": f"msg_fake_{n:04d}",
                        "type": "message",
                        "role": "assistant",
                        "model": body.get("model", "unknown"),
                        "content": content,
                        "stop_reason": stop,
                        "stop_sequence": None,
                        "usage": usage,
                    }
                send_json(self, status, headers, out)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def __enter__(self) -> "FakeAnthropic":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._server.shutdown()
        self._server.server_close()
