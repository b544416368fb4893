from rest_framework.routers import SimpleRouter

from books.api.views import BookViewSet, EntryViewSet

router = SimpleRouter(trailing_slash=False)
router.register("books", BookViewSet, basename="book")
router.register(r"books/(?P<book_id>\d+)/entries", EntryViewSet, basename="book-entry")

urlpatterns = router.urls
