"""The pages, mounted at the site root (issue 15)."""
from django.contrib.auth.views import LogoutView
from django.urls import path

from lore_platform.web.views import accounts, books, cast, library

urlpatterns = [
    path("", library.library, name="web-home"),
    path("login", accounts.SignInView.as_view(), name="web-login"),
    path("logout", LogoutView.as_view(), name="web-logout"),
    path("signup", accounts.signup, name="web-signup"),
    path("tenant", accounts.switch_tenant, name="web-tenant-switch"),
    path("keys", accounts.api_keys, name="web-keys"),
    path("keys/<int:key_id>/revoke", accounts.api_key_revoke_page, name="web-key-revoke"),
    path("library", library.library, name="web-library"),
    path("library/<int:book_id>", library.library_book, name="web-library-book"),
    path("library/<int:book_id>/export", library.library_export, name="web-library-export"),
    path("library/<int:book_id>/copy", library.library_copy, name="web-library-copy"),
    path("library/<int:book_id>/attach", library.library_attach, name="web-library-attach"),
    path("link/<str:token>", library.link_book, name="web-link"),
    path("books", books.my_books, name="web-books"),
    path("books/<int:book_id>", books.book_page, name="web-book"),
    path("books/<int:book_id>/import", books.book_import_into, name="web-book-import"),
    path("books/<int:book_id>/visibility", books.book_visibility, name="web-book-visibility"),
    path("books/<int:book_id>/link/rotate", books.book_link_rotate, name="web-book-rotate"),
    path("books/<int:book_id>/living-world", books.book_living_world, name="web-book-living"),
    path("books/<int:book_id>/export", books.book_export_page, name="web-book-export"),
    path("books/<int:book_id>/entries", books.entry_add, name="web-entry-add"),
    path("books/<int:book_id>/entries/bulk", books.entries_bulk, name="web-entries-bulk"),
    path("books/<int:book_id>/entries/<int:entry_id>/move", books.entry_move_page, name="web-entry-move"),
    path("books/<int:book_id>/entries/<int:entry_id>", books.entry_page, name="web-entry"),
    path("books/<int:book_id>/entries/<int:entry_id>/delete", books.entry_delete_page, name="web-entry-delete"),
    path("books/<int:book_id>/active", books.book_active_page, name="web-book-active"),
    path("books/<int:book_id>/preview", books.book_preview, name="web-book-preview"),
    path("characters", cast.characters, name="web-characters"),
    path("characters/<int:character_id>/preview", cast.character_preview, name="web-character-preview"),
]
