"""The wiring: settings, URLs, the Celery app, WSGI/ASGI entry points, the CLI and the demo.

The Celery app is loaded with the package so that every process (web, worker, tests) binds the
apps' ``shared_task`` declarations to it before any task is published.
"""
from config.celery import app as celery_app

__all__ = ["celery_app"]
