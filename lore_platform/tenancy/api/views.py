from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from drf_spectacular.utils import extend_schema
from rest_framework import mixins, status
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from lore_platform.api.base import TenantAPIView, TenantViewSet
from lore_platform.tenancy import services
from lore_platform.tenancy.actor import Actor
from lore_platform.tenancy.api.serializers import ApiKeyCreatedOut, ApiKeyCreateIn, ApiKeyOut, CallerOut
from lore_platform.tenancy.models import ApiKey
from lore_platform.tenancy.permissions import IsTenantAdmin


class TenantView(TenantAPIView):
    @extend_schema(responses=CallerOut, summary="The caller's tenant, role and scopes")
    def get(self, request: Request) -> Response:
        actor = self.actor
        data = {
            "tenant": actor.tenant,
            "role": actor.role,
            "scopes": sorted(actor.scopes),
            "user_email": actor.user.email if actor.user else None,
        }
        return Response(CallerOut(data).data)


class ApiKeyViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, TenantViewSet):
    """The tenant's API keys. Admins only; the secret is shown once, at creation."""

    permission_classes = [IsTenantAdmin]
    serializer_class = ApiKeyOut
    lookup_value_regex = r"\d+"

    def scoped_queryset(self, actor: Actor) -> QuerySet[ApiKey]:
        return ApiKey.objects.for_tenant(actor.tenant).order_by("-created_at")

    @extend_schema(request=ApiKeyCreateIn, responses={201: ApiKeyCreatedOut})
    def create(self, request: Request) -> Response:
        data = ApiKeyCreateIn(data=request.data)
        data.is_valid(raise_exception=True)
        issued = services.api_key_create(
            tenant=self.actor.tenant,
            name=data.validated_data["name"],
            scopes=data.validated_data["scopes"],
            user=self.actor.user,
        )
        body: dict[str, Any] = dict(ApiKeyOut(issued.api_key).data)
        body["key"] = issued.secret
        return Response(body, status=status.HTTP_201_CREATED)

    @extend_schema(request=None, responses=ApiKeyOut)
    @action(detail=True, methods=["post"])
    def revoke(self, request: Request, pk: str) -> Response:
        api_key = services.api_key_revoke(tenant=self.actor.tenant, key_id=int(pk))
        return Response(ApiKeyOut(api_key).data)
