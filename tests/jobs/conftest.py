from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.jobs.llm_server import LlmServer


@pytest.fixture
def llm_server() -> Iterator[LlmServer]:
    server = LlmServer().start()
    yield server
    server.stop()


@pytest.fixture
def model(llm_server: LlmServer, settings: Any) -> LlmServer:
    """The operator points the platform at the local server (short timeout and waits, so failures are quick)."""
    settings.LOREWEAVE_LLM_BASE_URL = llm_server.base_url
    settings.LOREWEAVE_LLM_API_KEY = "sk-test"
    settings.LOREWEAVE_LLM_MODEL = "test-model"
    settings.LOREWEAVE_LLM_TIMEOUT = 1.0
    settings.LOREWEAVE_LLM_MAX_RETRIES = 2
    settings.LOREWEAVE_LLM_RETRY_AFTER_MAX = 5.0
    return llm_server


@pytest.fixture
def no_model(settings: Any) -> None:
    settings.LOREWEAVE_LLM_BASE_URL = ""
    settings.LOREWEAVE_LLM_MODEL = ""
