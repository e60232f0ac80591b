"""LangChain's ``ChatOpenAI(...).bind_tools(...)`` against ``llamay serve`` on the real default model."""

from __future__ import annotations

import jsonschema
import pytest

langchain_openai = pytest.importorskip("langchain_openai", reason="pip install langchain-openai")

from tests.test_api_clients import server  # noqa: E402, F401  (fixture)

WEATHER = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}


def test_bind_tools_returns_a_valid_call(server):  # noqa: F811
    def get_weather(city: str) -> str:
        """Current weather in a city."""
        return "sunny"

    llm = langchain_openai.ChatOpenAI(base_url=f"http://127.0.0.1:{server.port}/v1", api_key="test-key",
                                      model="default", temperature=0, max_tokens=80, max_retries=0)
    bound = llm.bind_tools([get_weather], tool_choice="required")
    message = bound.invoke("What is the weather in Paris?")
    assert message.tool_calls, message
    call = message.tool_calls[0]
    assert call["name"] == "get_weather" and call["id"]
    jsonschema.validate(call["args"], WEATHER)
