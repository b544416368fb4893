from django.urls import path

from sharing.api.views import (
    CopyView,
    LanguagesView,
    LibraryBookListView,
    LibraryBookView,
    LibraryEntriesView,
    LibraryExportView,
    LinkBookView,
    LinkEntriesView,
    LinkExportView,
    LinkRotateView,
    SharingView,
    VisibilityView,
)

TOKEN = "<str:token>"

urlpatterns = [
    path("library/books", LibraryBookListView.as_view(), name="sharing-library"),
    path("library/books/<int:book_id>", LibraryBookView.as_view(), name="sharing-library-book"),
    path("library/books/<int:book_id>/entries", LibraryEntriesView.as_view(), name="sharing-library-entries"),
    path("library/books/<int:book_id>/export", LibraryExportView.as_view(), name="sharing-library-export"),
    path(f"library/links/{TOKEN}", LinkBookView.as_view(), name="sharing-link-book"),
    path(f"library/links/{TOKEN}/entries", LinkEntriesView.as_view(), name="sharing-link-entries"),
    path(f"library/links/{TOKEN}/export", LinkExportView.as_view(), name="sharing-link-export"),
    path("library/languages", LanguagesView.as_view(), name="sharing-languages"),
    path("library/copies", CopyView.as_view(), name="sharing-copy"),
    path("books/<int:book_id>/sharing", SharingView.as_view(), name="sharing-book"),
    path("books/<int:book_id>/visibility", VisibilityView.as_view(), name="sharing-visibility"),
    path("books/<int:book_id>/link/rotate", LinkRotateView.as_view(), name="sharing-link-rotate"),
]
