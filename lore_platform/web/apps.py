from django.apps import AppConfig


class WebConfig(AppConfig):
    name = "lore_platform.web"
    label = "web"
    verbose_name = "Web pages"
