"""Every task of ours retries by the one policy in ``lore_platform.tasks``."""
from __future__ import annotations

import cast.tasks  # noqa: F401  (registers the cast tasks)
import retrieval.adapter.tasks
import sharing.tasks
from config.celery import app
from lore_platform.tasks import TASK_RETRY, TRANSIENT_ERRORS


def test_every_task_uses_the_one_retry_policy() -> None:
    names = sorted(name for name in app.tasks if name.startswith(("retrieval.", "sharing.", "cast.", "books.")))
    assert {"retrieval.index_entries", "retrieval.reindex_book", "sharing.book_translate", "cast.request_usage_sweep",
            "books.entries_changed", "books.shared_book_changed"} <= set(names)
    for name in names:
        task = app.tasks[name]
        assert task.acks_late is True, name
        assert tuple(task.autoretry_for) == TRANSIENT_ERRORS, name
        assert (task.retry_backoff, task.retry_backoff_max, task.retry_jitter) == (2, 120, True), name
        assert task.max_retries == TASK_RETRY["max_retries"] == 6, name
    # The modules only name the policy; none spells its own.
    assert retrieval.adapter.tasks.index_entries.name == "retrieval.index_entries"
    assert sharing.tasks.book_translate.name == "sharing.book_translate"
