from django.urls import path
from rest_framework.routers import SimpleRouter

from cast.api.views import (
    AttachmentViewSet,
    BookLoreView,
    BookPreviewView,
    CharacterViewSet,
    ChatViewSet,
    NovelViewSet,
    PersonaImportView,
    PersonaListView,
    StatelessContextView,
    StoryViewSet,
)

router = SimpleRouter(trailing_slash=False)
router.register("characters", CharacterViewSet, basename="character")
router.register("stories", StoryViewSet, basename="story")
router.register("novels", NovelViewSet, basename="novel")
router.register("chats", ChatViewSet, basename="chat")
router.register("attachments", AttachmentViewSet, basename="attachment")

urlpatterns = [
    path("context", StatelessContextView.as_view(), name="context"),
    path("personas", PersonaListView.as_view(), name="personas"),
    path("personas/import", PersonaImportView.as_view(), name="persona-import"),
    path("books/<int:book_id>/preview", BookPreviewView.as_view(), name="book-preview"),
    path("books/<int:book_id>/lore/<int:entry_id>", BookLoreView.as_view(), name="book-lore"),
    *router.urls,
]
