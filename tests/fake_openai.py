"""A local fake of an OpenAI-compatible chat completions server (vLLM, Ollama, llama.cpp) for
tests: no network, no key.

A ``ThreadingHTTPServer`` on 127.0.0.1 answers ``POST /v1/chat/completions`` with the real
response JSON: a message whose ``tool_calls`` call the request's function (``arguments`` a JSON
string), or a text message (prose, or a JSON object for a JSON-output request), ``usage`` with
``prompt_tokens_details.cached_tokens``, an ``x-request-id`` header; or an error body
(``{"error": {"message", "type", "code"}}``) with its status and headers. The real ``openai``
client talks to it through ``base_url``.

With ``tools=False`` it behaves as a server without tool calling: a request that sends ``tools``
gets a 400 naming them (``tools="ignore"``: it answers with prose instead). Replies come from a
script (consumed in order), then from a ``default`` callable; every request body is recorded.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable

from fake_anthropic import next_reply, send_json

DEFAULT_USAGE = {"prompt_tokens": 3000, "completion_tokens": 500, "cached_tokens": 1000}


def answer_reply(data: dict[str, Any], usage: dict[str, int] | None = None, finish: str | None = None) -> dict[str, Any]:
    """A structured answer: a call of the request's function with ``data`` (or, for a JSON-output
    request, ``data`` as the message content)."""
    return {"kind": "answer", "data": data, "usage": usage or {}, "finish": finish}


def text_reply(text: str) -> dict[str, Any]:
    """Prose, no function call."""
    return {"kind": "text", "text": text, "usage": {}}


def error_reply(status: int, message: str, code: str | None = None, headers: dict[str, str] | None = None) -> dict[str, Any]:
    return {"kind": "error", "status": status, "message": message, "code": code, "headers": headers or {}}


class FakeOpenAI:
    """The fake server; use as a context manager (``base_url`` is what the client needs)."""

    def __init__(self, script: list | None = None, default: Callable | dict | None = None, tools: bool | str = True):
        self.script = list(script or [])
        self.default = default
        self.tools = tools
        self.requests: list[dict[str, Any]] = []
        self.billed: list[dict[str, int]] = []
        self._lock = threading.Lock()
        self._n = 0
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers.get("content-length", 0))) or b"{}")
                with fake._lock:
                    fake.requests.append(body)
                    fake._n += 1
                    n = fake._n
                    if self.path.rstrip("/") != "/v1/chat/completions":
                        reply = error_reply(404, f"no route {self.path}")
                    elif "tools" in body and fake.tools is False:
                        reply = error_reply(400, "tools are not supported by this server", code="invalid_request_error")
                    elif "tools" in body and fake.tools == "ignore":
                        reply = text_reply("Here is my plan: a gradient-boosting model.")
                    else:
                        reply = next_reply(fake, body, error_reply(500, "the fake's script is spent"))
                    if reply["kind"] != "error":
                        fake.billed.append({**DEFAULT_USAGE, **reply["usage"]})
                self._answer(body, reply, n)

            def _answer(self, body, reply, n):
                headers = {"content-type": "application/json", "x-request-id": f"req_fake_{n:04d}"}
                if reply["kind"] == "error":
                    status = reply["status"]
                    headers.update(reply["headers"])
                    out = {"error": {"message": reply["message"], "type": "invalid_request_error", "code": reply["code"]}}
                else:
                    status = 200
                    usage = {**DEFAULT_USAGE, **reply["usage"]}
                    message: dict[str, Any] = {"role": "assistant", "content": None}
                    finish = "stop"
                    if reply["kind"] == "answer" and "tools" in body:
                        name = body["tools"][0]["function"]["name"]
                        message["tool_calls"] = [{"id": f"call_{n:04d}", "type": "function",
                                                  "function": {"name": name, "arguments": json.dumps(reply["data"])}}]
                        finish = "tool_calls"
                    elif reply["kind"] == "answer":
                        message["content"] = json.dumps(reply["data"])
                    else:
                        message["content"] = reply["text"]
                    out = {
                        "id": f"chatcmpl-{n:04d}", "object": "chat.completion", "created": 1_700_000_000 + n, "model": body.get("model", "?"),
                        "choices": [{"index": 0, "message": message, "finish_reason": reply.get("finish") or finish}],
                        "usage": {"prompt_tokens": usage["prompt_tokens"], "completion_tokens": usage["completion_tokens"],
                                  "total_tokens": usage["prompt_tokens"] + usage["completion_tokens"],
                                  "prompt_tokens_details": {"cached_tokens": usage["cached_tokens"]}},
                    }
                send_json(self, status, headers, out)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}/v1"

    def __enter__(self) -> "FakeOpenAI":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._server.shutdown()
        self._server.server_close()
