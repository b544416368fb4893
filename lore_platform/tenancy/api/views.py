from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from django.urls import reverse
from drf_spectacular.openapi import AutoSchema
from drf_spectacular.utils import extend_schema
from rest_framework import mixins, status
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from lore_platform.api.base import TenantAPIView, TenantViewSet
from lore_platform.api.conditional import SCHEMA
from lore_platform.errors import ValidationFailed
from lore_platform.etags import content_version
from lore_platform.tenancy import selectors, services
from lore_platform.tenancy.actor import Actor
from lore_platform.tenancy.api.serializers import (
    ApiKeyCreatedOut,
    ApiKeyCreateIn,
    ApiKeyOut,
    CallerOut,
    InvitationCreatedOut,
    InvitationOut,
    MemberAddIn,
    MemberOut,
    MemberRoleIn,
    TenantCorsIO,
    TenantPreconditionsIO,
)
from lore_platform.tenancy.models import ApiKey, Invitation, Membership
from lore_platform.tenancy.permissions import IsTenantAdmin
from lore_platform.tenancy.selectors import invitations_pending


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


# The body as the server reads it: exactly one field (unknown ones are refused, so the schema says so).
CORS_ORIGINS_IN = {
    "application/json": {
        "type": "object",
        "properties": {"origins": {
            "type": "array", "maxItems": services.CORS_ORIGINS_MAX,
            "items": {"type": "string", "minLength": 1, "maxLength": services.CORS_ORIGIN_MAX_CHARS},
            "description": "Browser origins (scheme://host[:port], no path, no wildcard) whose pages may call the "
                           "API with this tenant's keys. Anonymous reads of the public library are open to every "
                           "origin.",
        }},
        "required": ["origins"],
        "additionalProperties": False,
    }
}


class _BodyRequiredSchema(AutoSchema):
    """drf-spectacular marks a raw request schema's body optional; this one is required."""

    def _get_request_body(self, direction: str = "request") -> dict[str, Any] | None:
        body = super()._get_request_body(direction)
        if body:
            body["required"] = True
        return body


class TenantCorsView(TenantAPIView):
    """The browser origins allowed to call the API with this tenant's keys (CORS, P-6). Admins only."""

    permission_classes = [IsTenantAdmin]
    schema = _BodyRequiredSchema()

    def _out(self, origins: list[str]) -> Response:
        return self.tagged(Response({"origins": origins}), "cors", self.actor.tenant.pk, content_version(origins))

    @extend_schema(responses={200: TenantCorsIO, **SCHEMA["read"]["responses"]},
                   parameters=SCHEMA["read"]["parameters"],
                   summary="Browser origins allowed to call the API with this tenant's keys")
    def get(self, request: Request) -> Response:
        return self._out(selectors.tenant_cors_origins(self.actor.tenant))

    @extend_schema(request=CORS_ORIGINS_IN, responses={200: TenantCorsIO, **SCHEMA["write"]["responses"]},
                   parameters=SCHEMA["write"]["parameters"],
                   summary="Replace the allowed browser origins (422 names a malformed one)")
    def put(self, request: Request) -> Response:
        if not isinstance(request.data, dict) or "origins" not in request.data:
            raise ValidationFailed("Send {\"origins\": [...]}.", field="origins", rule="P-6")
        unknown = sorted(set(request.data) - {"origins"})
        if unknown:
            # Refused, not ignored: a misspelt field would otherwise look saved.
            raise ValidationFailed("Unknown field {name}; the body is {{\"origins\": [...]}}.",
                                   values={"name": repr(unknown[0])}, field=unknown[0], rule="P-6")
        origins = services.tenant_cors_set(tenant=self.actor.tenant, origins=request.data["origins"],
                                           expected_version=self.expected_version("cors", self.actor.tenant.pk))
        return self._out(origins)


PRECONDITIONS_IN = {
    "application/json": {
        "type": "object",
        "properties": {"require_if_match": {"type": "boolean"}},
        "required": ["require_if_match"],
        "additionalProperties": False,
    }
}


class TenantPreconditionsView(TenantAPIView):
    """Whether this tenant requires If-Match on every change of an editable resource. Admins only."""

    permission_classes = [IsTenantAdmin]
    schema = _BodyRequiredSchema()

    def _out(self, value: bool) -> Response:
        return self.tagged(Response({"require_if_match": value}), "preconditions", self.actor.tenant.pk,
                           content_version(value))

    @extend_schema(responses={200: TenantPreconditionsIO, **SCHEMA["read"]["responses"]},
                   parameters=SCHEMA["read"]["parameters"],
                   summary="Whether changes must carry If-Match (428 without)")
    def get(self, request: Request) -> Response:
        return self._out(self.actor.tenant.require_if_match)

    @extend_schema(request=PRECONDITIONS_IN, responses={200: TenantPreconditionsIO, **SCHEMA["write"]["responses"]},
                   parameters=SCHEMA["write"]["parameters"],
                   summary="Require If-Match on every PATCH/PUT/DELETE of books and entries, or not")
    def put(self, request: Request) -> Response:
        if not isinstance(request.data, dict) or "require_if_match" not in request.data:
            raise ValidationFailed("Send {\"require_if_match\": true|false}.", field="require_if_match")
        unknown = sorted(set(request.data) - {"require_if_match"})
        if unknown:
            raise ValidationFailed("Unknown field {name}; the body is {{\"require_if_match\": true|false}}.",
                                   values={"name": repr(unknown[0])}, field=unknown[0])
        value = services.tenant_preconditions_set(
            tenant=self.actor.tenant, require_if_match=request.data["require_if_match"],
            expected_version=self.expected_version("preconditions", self.actor.tenant.pk))
        return self._out(value)


def _key_created(issued: services.IssuedKey) -> Response:
    body: dict[str, Any] = dict(ApiKeyOut(issued.api_key).data)
    body["key"] = issued.secret
    return Response(body, status=status.HTTP_201_CREATED)


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
        return _key_created(issued)

    @extend_schema(request=None, responses=ApiKeyOut)
    @action(detail=True, methods=["post"])
    def revoke(self, request: Request, pk: str) -> Response:
        api_key = services.api_key_revoke(tenant=self.actor.tenant, key_id=int(pk))
        return Response(ApiKeyOut(api_key).data)


class MemberViewSet(mixins.ListModelMixin, TenantViewSet):
    """The tenant's members (S-1). Admins only: add by email, change a role, remove, issue a key."""

    permission_classes = [IsTenantAdmin]
    serializer_class = MemberOut
    lookup_value_regex = r"\d+"

    def scoped_queryset(self, actor: Actor) -> QuerySet[Membership]:
        return Membership.objects.for_tenant(actor.tenant).select_related("user").order_by("created_at", "id")

    @extend_schema(request=MemberAddIn, responses={201: InvitationCreatedOut},
                   summary="Invite a member by email (the link is shown once; they join by accepting it)")
    def create(self, request: Request) -> Response:
        data = MemberAddIn(data=request.data)
        data.is_valid(raise_exception=True)
        issued = services.invitation_create(
            tenant=self.actor.tenant, invited_by=self.actor.user, link_for=invitation_link(request),
            **data.validated_data,
        )
        return Response(invitation_created(issued), status=status.HTTP_201_CREATED)

    @extend_schema(request=MemberRoleIn, responses=MemberOut, summary="Change a member's role")
    def partial_update(self, request: Request, pk: str) -> Response:
        data = MemberRoleIn(data=request.data)
        data.is_valid(raise_exception=True)
        membership = services.member_role_change(
            tenant=self.actor.tenant, membership_id=int(pk), role=data.validated_data.get("role")
        )
        return Response(MemberOut(membership).data)

    @extend_schema(request=None, responses={204: None}, summary="Remove a member (their keys are revoked)")
    def destroy(self, request: Request, pk: str) -> Response:
        services.member_remove(tenant=self.actor.tenant, membership_id=int(pk))
        return Response(status=status.HTTP_204_NO_CONTENT)

    @extend_schema(request=ApiKeyCreateIn, responses={201: ApiKeyCreatedOut},
                   summary="An API key acting as this member, with the member's rights")
    @action(detail=True, methods=["post"], url_path="api-keys")
    def api_keys(self, request: Request, pk: str) -> Response:
        data = ApiKeyCreateIn(data=request.data)
        data.is_valid(raise_exception=True)
        issued = services.member_api_key_create(
            tenant=self.actor.tenant, membership_id=int(pk), name=data.validated_data["name"],
            scopes=data.validated_data["scopes"],
        )
        return _key_created(issued)


def invitation_link(request: Any) -> services.LinkFor:
    """Absolute invitation links on the host the admin called (the page that accepts is web's)."""
    return lambda token: request.build_absolute_uri(reverse("web-invitation", args=[token]))


def invitation_created(issued: services.IssuedInvitation) -> dict[str, Any]:
    body: dict[str, Any] = dict(InvitationOut(issued.invitation).data)
    body["link"] = issued.link
    return body


class InvitationViewSet(mixins.ListModelMixin, TenantViewSet):
    """The tenant's pending invitations (S-1). Admins only; ``POST /members`` invites."""

    permission_classes = [IsTenantAdmin]
    serializer_class = InvitationOut
    lookup_value_regex = r"\d+"

    def scoped_queryset(self, actor: Actor) -> QuerySet[Invitation]:
        return invitations_pending(actor.tenant)

    @extend_schema(request=None, responses=InvitationOut, summary="Revoke a pending invitation (its link stops working)")
    @action(detail=True, methods=["post"])
    def revoke(self, request: Request, pk: str) -> Response:
        invitation = services.invitation_revoke(tenant=self.actor.tenant, invitation_id=int(pk))
        return Response(InvitationOut(invitation).data)
