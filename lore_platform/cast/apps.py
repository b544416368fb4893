from django.apps import AppConfig


class CastConfig(AppConfig):
    name = "lore_platform.cast"
    label = "cast"
    verbose_name = "Characters, stories, novels and chats"
