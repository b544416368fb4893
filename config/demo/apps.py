from django.apps import AppConfig


class DemoConfig(AppConfig):
    """The embedded default's demo tenant and book (``manage.py demo_setup``): wiring, above every app."""

    name = "config.demo"
    label = "demo"
