"""Language-model access: the only package that imports ``anthropic`` (DESIGN §5).

:class:`~mcgs.llm.client.AnthropicClient` sends one structured request (a forced tool call
whose input schema is a pydantic model) and returns the validated answer with its usage;
errors are mapped to the few kinds the coder acts on (:class:`LLMError` and subclasses).
"""

from mcgs.llm.client import (
    AnthropicClient,
    CallUsage,
    LLMError,
    LLMUnavailable,
    MalformedAnswer,
    PromptTooLong,
)

__all__ = ["AnthropicClient", "CallUsage", "LLMError", "LLMUnavailable", "MalformedAnswer", "PromptTooLong"]
