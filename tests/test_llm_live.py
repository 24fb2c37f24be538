"""One tiny real call to the Anthropic API. Deselected by default (``addopts = -m 'not live'``);
run with ``pytest -m live`` and the key in ``ANTHROPIC_API_KEY`` (conftest keeps it aside as
``MCGS_LIVE_ANTHROPIC_API_KEY`` so no other test can see it)."""

from __future__ import annotations

import os

import pytest
from pydantic import BaseModel

from mcgs.llm import AnthropicClient
from mcgs.settings import LLMSettings

pytestmark = pytest.mark.live


class Echo(BaseModel):
    word: str


def test_one_tiny_structured_call():
    key = os.environ.get("MCGS_LIVE_ANTHROPIC_API_KEY")
    if not key:
        pytest.skip("no ANTHROPIC_API_KEY: the live test needs a real key")
    s = LLMSettings()
    ans, usage = AnthropicClient(s, api_key=key).ask(
        model=s.cheap_model, system="You answer with the tool.", user="Call the tool with the word 'ok'.",
        answer=Echo, tool_name="echo", tool_description="Echo one word.", max_tokens=64,
    )
    assert ans.word.strip().lower().startswith("ok") and usage.output_tokens > 0 and usage.request_id
