from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.jobs.llm_server import LlmServer


@pytest.fixture
def llm_server(settings: Any) -> Iterator[LlmServer]:
    """The local test server on 127.0.0.1. The operator allow-lists exactly its address and port and permits
    tenant endpoints, so a tenant admin may point the tenant at it (issue 26: nothing else on loopback)."""
    server = LlmServer().start()
    settings.OUTBOUND_ALLOW = [*getattr(settings, "OUTBOUND_ALLOW", []), f"127.0.0.1:{server.port}"]
    settings.MODEL_TENANT_ENDPOINTS = True
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
