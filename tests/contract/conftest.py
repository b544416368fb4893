from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.contract.live import LiveServer, live_server


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    with live_server(Path(tmp_path_factory.mktemp("live"))) as server:
        yield server
