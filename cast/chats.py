"""Stories, novels and chats: writes (their reads are in ``cast.selectors``)."""
from __future__ import annotations

from django.db import transaction

from cast.models import Character, Chat, Novel, Story
from lore_platform.errors import NotFound, ValidationFailed
from lore_platform.tenancy.actor import Actor
from lore_platform.tenancy.models import Tenant

PROFILES = {choice.value for choice in Tenant.Profile}


def _characters(actor: Actor, ids: list[int], field: str) -> list[Character]:
    found = list(Character.objects.for_tenant(actor.tenant).filter(pk__in=ids))
    if len(found) != len(set(ids)):
        raise NotFound("One or more characters do not exist.", field=field)
    by_id = {character.pk: character for character in found}
    return [by_id[i] for i in dict.fromkeys(ids)]


def _title(title: str) -> str:
    title = (title or "").strip()
    if not title or len(title) > 120:
        raise ValidationFailed("A title is 1–120 characters.", field="title")
    return title


@transaction.atomic
def story_create(*, actor: Actor, title: str, cast_ids: list[int] | None = None) -> Story:
    story = Story.objects.create(tenant=actor.tenant, title=_title(title))
    story.cast.set(_characters(actor, cast_ids or [], "cast_ids"))
    return story


@transaction.atomic
def novel_create(*, actor: Actor, title: str, cast_ids: list[int] | None = None) -> Novel:
    novel = Novel.objects.create(tenant=actor.tenant, title=_title(title))
    novel.cast.set(_characters(actor, cast_ids or [], "cast_ids"))
    return novel


@transaction.atomic
def chat_create(
    *,
    actor: Actor,
    kind: str,
    character_id: int | None = None,
    member_ids: list[int] | None = None,
    story_id: int | None = None,
    novel_id: int | None = None,
    channel_id: str = "",
    parent_channel_id: str = "",
    profile: str = "",
    model_id: str = "",
) -> Chat:
    if kind not in Chat.Kind.values:
        raise ValidationFailed("kind must be one of {kinds}.", values={"kinds": sorted(Chat.Kind.values)},
                               field="kind")
    if profile and profile not in PROFILES:
        raise ValidationFailed("profile must be one of {profiles}.", values={"profiles": sorted(PROFILES)},
                               field="profile")
    chat = Chat(
        tenant=actor.tenant,
        owner=actor.user,
        kind=kind,
        channel_id=channel_id or "",
        parent_channel_id=parent_channel_id or "",
        profile=profile or "",
        model_id=model_id or "",
    )
    members: list[Character] = []
    if kind == Chat.Kind.CHARACTER:
        if character_id is None:
            raise ValidationFailed("A character chat names its character.", field="character_id")
        chat.character = _characters(actor, [character_id], "character_id")[0]
    elif kind == Chat.Kind.GROUP:
        members = _characters(actor, member_ids or [], "member_ids")
        if len(members) < 2:
            raise ValidationFailed("A group chat has at least two characters.", field="member_ids")
    elif kind == Chat.Kind.STORY:
        chat.story = Story.objects.for_tenant(actor.tenant).filter(pk=story_id).first() if story_id else None
        if chat.story is None:
            raise NotFound("No such story.", field="story_id")
    elif kind == Chat.Kind.NOVEL:
        chat.novel = Novel.objects.for_tenant(actor.tenant).filter(pk=novel_id).first() if novel_id else None
        if chat.novel is None:
            raise NotFound("No such novel.", field="novel_id")
    if character_id is not None and chat.character is None:
        # A server-profile persona may speak in a story/novel chat too.
        chat.character = _characters(actor, [character_id], "character_id")[0]
    chat.save()
    if members:
        chat.members.set(members)
    return chat
