from django.apps import AppConfig


class CastConfig(AppConfig):
    name = "cast"
    label = "cast"
    verbose_name = "Characters, stories, novels and chats"
