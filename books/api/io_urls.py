"""Import and export routes. Included before ``books.api.urls`` so that
``books/import`` is never read as a book id."""

from django.urls import path

from books.api.io_views import (
    BookExportView,
    BookImportIntoView,
    BookImportView,
    ImportLimitsView,
)

urlpatterns = [
    path("books/import", BookImportView.as_view(), name="book-import"),
    path("books/<int:book_id>/import", BookImportIntoView.as_view(), name="book-import-into"),
    path("books/<int:book_id>/export", BookExportView.as_view(), name="book-export"),
    path("import-limits", ImportLimitsView.as_view(), name="import-limits"),
]
