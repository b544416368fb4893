from django.apps import AppConfig


class BooksConfig(AppConfig):
    name = "books"
    default_auto_field = "django.db.models.BigAutoField"
