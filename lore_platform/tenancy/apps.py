from django.apps import AppConfig


class TenancyConfig(AppConfig):
    name = "lore_platform.tenancy"
    label = "tenancy"
    verbose_name = "Tenants, memberships and API keys"

    def ready(self) -> None:
        from corsheaders.signals import check_request_enabled
        from django.db.models.signals import post_delete, post_save

        from lore_platform.tenancy import schema  # noqa: F401  (registers the OpenAPI extension)
        from lore_platform.tenancy.cors import origin_allowed
        from lore_platform.tenancy.models import ApiKey, Membership, Tenant, User
        from lore_platform.tenancy.selectors import verified_keys

        # Who a key acts as may have changed: forget this process's verified keys.
        def forget(**_: object) -> None:
            verified_keys.clear()

        for model in (ApiKey, Membership, Tenant, User):
            post_save.connect(forget, sender=model, weak=False, dispatch_uid=f"verified-keys-{model.__name__}")
            post_delete.connect(forget, sender=model, weak=False, dispatch_uid=f"verified-keys-{model.__name__}-del")

        # Which origins may read an API answer: the tenant's own list (P-6, ``lore_platform.tenancy.cors``).
        check_request_enabled.connect(origin_allowed, weak=False, dispatch_uid="tenancy-cors-origin-allowed")
