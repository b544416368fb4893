from django.urls import path
from rest_framework.routers import SimpleRouter

from lore_platform.tenancy.api.views import (
    ApiKeyViewSet,
    InvitationViewSet,
    MemberViewSet,
    TenantCorsView,
    TenantPreconditionsView,
    TenantView,
)

router = SimpleRouter(trailing_slash=False)
router.register("api-keys", ApiKeyViewSet, basename="api-key")
router.register("members", MemberViewSet, basename="member")
router.register("invitations", InvitationViewSet, basename="invitation")

urlpatterns = [
    path("tenant", TenantView.as_view(), name="tenant"),
    path("tenant/cors", TenantCorsView.as_view(), name="tenant-cors"),
    path("tenant/preconditions", TenantPreconditionsView.as_view(), name="tenant-preconditions"),
    *router.urls,
]
