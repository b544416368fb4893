"""Loreweave platform: settings, wiring, tenants and the cast (characters, stories, chats).

The Celery app lives in ``lore_platform.celery`` and is imported by the modules
that define tasks, so importing this package stays cheap for the CLI.
"""
