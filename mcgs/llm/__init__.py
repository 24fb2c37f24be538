"""Language-model access: the only package that imports ``anthropic`` and ``openai`` (DESIGN §5).

:class:`~mcgs.llm.client.AnthropicClient` (the Messages API) and
:class:`~mcgs.llm.openai_client.OpenAIClient` (OpenAI-compatible servers: vLLM, Ollama,
llama.cpp, hosted APIs) each send one structured request (the input of a forced tool call, or
JSON output, validated by a pydantic model) and return the validated answer with its usage;
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

__all__ = ["AnthropicClient", "OpenAIClient", "CallUsage", "LLMError", "LLMUnavailable", "MalformedAnswer", "PromptTooLong",
           "PROVIDERS", "make_client", "unknown_models_free"]

#: The coders that call a language model, each the name of its provider.
PROVIDERS = ("anthropic", "openai")


def make_client(provider: str, settings):
    """The client of ``provider`` (``anthropic`` or ``openai``) for the llm settings ``settings``.

    Raises:
        LLMUnavailable: (fatal) no key for the provider, or its package is missing.
    """
    if provider == "openai":
        from mcgs.llm.openai_client import OpenAIClient

        return OpenAIClient(settings)
    return AnthropicClient(settings)


def unknown_models_free(provider: str, settings) -> bool:
    """Whether a model the price list lacks costs nothing: a model served by an OpenAI-compatible
    server on this machine or a private network (vLLM, Ollama, llama.cpp); any other unknown
    model is priced as the dearest known one, so the budget never under-counts."""
    import os

    from mcgs.llm.openai_client import is_local_url

    return provider == "openai" and is_local_url(settings.base_url or os.environ.get("OPENAI_BASE_URL"))


def __getattr__(name):  # OpenAIClient without importing openai until it is used
    if name == "OpenAIClient":
        from mcgs.llm.openai_client import OpenAIClient

        return OpenAIClient
    raise AttributeError(name)
