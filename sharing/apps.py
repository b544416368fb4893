from django.apps import AppConfig


class SharingConfig(AppConfig):
    name = "sharing"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # Registers the tasks ``books.events`` publishes by name, in web processes too.
        from sharing import tasks  # noqa: F401
