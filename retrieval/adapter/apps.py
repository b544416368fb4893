from django.apps import AppConfig


class RetrievalConfig(AppConfig):
    name = "retrieval.adapter"
    label = "retrieval"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # Registers the tasks ``books.events`` publishes by name, in web processes too.
        from retrieval.adapter import tasks  # noqa: F401
