from django.urls import path
from rest_framework.routers import SimpleRouter

from books.api.living_views import (
    AiUpdateAcceptView,
    AiUpdateRejectView,
    AiUpdatesView,
    AiUpdateUndoView,
    AiUpdateView,
)
from books.api.views import BookViewSet, EntryViewSet

router = SimpleRouter(trailing_slash=False)
router.register("books", BookViewSet, basename="book")
router.register(r"books/(?P<book_id>\d+)/entries", EntryViewSet, basename="book-entry")

urlpatterns = [
    path("books/<int:book_id>/ai-updates", AiUpdatesView.as_view(), name="book-ai-updates"),
    path("books/<int:book_id>/ai-updates/<int:write_id>", AiUpdateView.as_view(), name="book-ai-update"),
    path("books/<int:book_id>/ai-updates/<int:write_id>/undo", AiUpdateUndoView.as_view(), name="book-ai-update-undo"),
    path("books/<int:book_id>/ai-updates/<int:write_id>/accept", AiUpdateAcceptView.as_view(),
         name="book-ai-update-accept"),
    path("books/<int:book_id>/ai-updates/<int:write_id>/reject", AiUpdateRejectView.as_view(),
         name="book-ai-update-reject"),
    *router.urls,
]
