from rest_framework import serializers

from lore_platform.tenancy.models import ApiKey, Invitation, Membership, Tenant


class TenantOut(serializers.ModelSerializer):
    class Meta:
        model = Tenant
        fields = ["id", "name", "slug", "default_profile", "created_at"]


class CallerOut(serializers.Serializer):
    tenant = TenantOut()
    role = serializers.CharField()
    scopes = serializers.ListField(child=serializers.CharField())
    user_email = serializers.EmailField(allow_null=True)


class ApiKeyOut(serializers.ModelSerializer):
    class Meta:
        model = ApiKey
        fields = ["id", "name", "prefix", "scopes", "created_at", "last_used_at", "revoked_at"]


class ApiKeyCreateIn(serializers.Serializer):
    name = serializers.CharField(max_length=120)
    scopes = serializers.ListField(child=serializers.ChoiceField(choices=ApiKey.Scope.values), min_length=1)


class ApiKeyCreatedOut(ApiKeyOut):
    key = serializers.CharField(help_text="The full key. Shown once; only a hash is stored.")

    class Meta(ApiKeyOut.Meta):
        fields = [*ApiKeyOut.Meta.fields, "key"]


class MemberOut(serializers.Serializer):
    id = serializers.IntegerField(help_text="The membership's id.")
    email = serializers.EmailField(source="user.email")
    role = serializers.ChoiceField(choices=Membership.Role.choices)
    created_at = serializers.DateTimeField()


class MemberAddIn(serializers.Serializer):
    """An invitation: the person joins only by accepting it, signed in as the email's owner."""

    email = serializers.EmailField()
    role = serializers.ChoiceField(choices=Membership.Role.choices, default=Membership.Role.MEMBER)


class MemberRoleIn(serializers.Serializer):
    role = serializers.ChoiceField(choices=Membership.Role.choices, required=False,
                                   help_text="The new role; omitted, nothing changes.")


class InvitationOut(serializers.ModelSerializer):
    invited_by = serializers.EmailField(source="invited_by.email", allow_null=True, default=None)

    class Meta:
        model = Invitation
        fields = ["id", "email", "role", "invited_by", "created_at", "expires_at"]


class InvitationCreatedOut(InvitationOut):
    link = serializers.CharField(help_text="The invitation link. Shown once (and mailed); only a hash is stored.")

    class Meta(InvitationOut.Meta):
        fields = [*InvitationOut.Meta.fields, "link"]


class TenantPreconditionsIO(serializers.Serializer):
    require_if_match = serializers.BooleanField(
        help_text="When true, every PATCH/PUT/DELETE of an editable resource (books, entries) must send "
                  "If-Match with the ETag it read: 428 `precondition_required` without it. A stale If-Match is "
                  "412 `precondition_failed` either way. Default false.",
    )


class TenantCorsIO(serializers.Serializer):
    origins = serializers.ListField(
        child=serializers.CharField(max_length=200, trim_whitespace=False), max_length=50,
        help_text="Browser origins (scheme://host[:port], no path, no wildcard) whose pages may call the API "
                  "with this tenant's keys. Anonymous reads of the public library are open to every origin.",
    )
