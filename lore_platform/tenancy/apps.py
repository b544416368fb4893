from django.apps import AppConfig


class TenancyConfig(AppConfig):
    name = "lore_platform.tenancy"
    label = "tenancy"
    verbose_name = "Tenants, memberships and API keys"

    def ready(self) -> None:
        from lore_platform.tenancy import schema  # noqa: F401  (registers the OpenAPI extension)
