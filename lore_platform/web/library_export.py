"""Export of a library book by any reader (SPEC §10, I-6: whoever can see a book may export
it to SillyTavern world info). ``books.exports.book_export`` is the owner's export (every
format, tenant-only settings included); a reader gets the world info only, without them."""
from __future__ import annotations

from books.exports import CONTENT_TYPES, book_as_imported, export_filename
from books.formats import export_book
from books.models import Book, Profile
from lore_platform.errors import PermissionDenied

READER_FORMAT = "sillytavern"


def library_book_export(book: Book) -> tuple[bytes, str, str]:
    """``book`` (already vetted as readable by ``sharing.selectors``) as SillyTavern world info."""
    if book.profile == Profile.SERVER:
        raise PermissionDenied("Server lorebooks are exported by the server's admins only (S-1).", rule="S-1")
    payload = export_book(book_as_imported(book), READER_FORMAT)
    return payload, CONTENT_TYPES[READER_FORMAT], export_filename(book.title, READER_FORMAT)
