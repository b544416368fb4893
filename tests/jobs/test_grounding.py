"""The grounding check (issue 33 point 5): a split draft measured against its notes, DB-free."""
from __future__ import annotations

from jobs import grounding
from jobs.grounding import (
    GROUNDED_MIN,
    Source,
    draft_ground,
    draft_placeholders,
    is_placeholder,
)

NOTES = """# The Drowned Isles

## Saltmarch
A fishing town on stilts where the tide-priests keep the bells rung every hour.

## The Lamplighters
A guild of lighthouse-keepers who rule the isles from their towers by old charter.
"""

CJK_NOTES = """## 盐沼镇
建在高脚桩上的渔镇，潮汐祭司每个时辰都要敲响钟声。

## 守灯人
灯塔守护者组成的行会，依照古老的特许状在塔中统治群岛。
"""


def test_lore_copied_with_other_case_spacing_and_punctuation_is_grounded():
    source = Source.of(NOTES)
    measured = grounding.grounding("a FISHING town on stilts —  where the tide priests keep the bells rung", source)
    assert measured.share == 1.0 and measured.grounded


def test_invented_lore_about_the_notes_own_names_is_not_grounded():
    source = Source.of(NOTES)
    measured = grounding.grounding("Saltmarch is ruled by golden dragons who sleep beneath the Lamplighters' volcano.",
                                   source)
    assert measured.share < GROUNDED_MIN and not measured.grounded


def test_text_without_spaces_is_measured_by_characters():
    source = Source.of(CJK_NOTES)
    assert grounding.grounding("建在高脚桩上的渔镇。潮汐祭司每个时辰都要敲响钟声！", source).share == 1.0
    assert not grounding.grounding("金色的巨龙在火山下沉睡，守护着无尽的宝藏。", source).grounded
    assert source.has_phrase("潮汐祭司") and not source.has_phrase("巨龙")


def test_aliases_must_be_whole_words_of_the_notes():
    source = Source.of(NOTES)
    assert source.has_phrase("tide-priests") and source.has_phrase("SALTMARCH")
    assert not source.has_phrase("salt") and not source.has_phrase("dragons")


def test_placeholders_are_the_prompts_shapes_and_field_names():
    for text in ["...", "…", "", "  ", "alias", "Keyword", "keywords", "\"...\""]:
        assert is_placeholder(text), text
    for text in ["Saltmarch", "Mara...", "盐沼镇", "K-9"]:
        assert not is_placeholder(text), text


def test_a_draft_is_flagged_cleaned_and_its_missing_topics_named():
    draft = [{"title": "Saltmarch", "lore": "A fishing town on stilts where the tide-priests keep the bells rung.",
              "aliases": ["...", "saltmarch", "Salt City"], "canon": False},
             {"title": "Dragons", "lore": "Golden dragons sleep beneath the volcano and trade in secrets.",
              "aliases": [], "canon": False}]
    warnings = draft_ground(draft, NOTES)
    assert "flags" not in draft[0] and draft[0]["aliases"] == ["saltmarch"]
    assert "it may be invented" in draft[1]["flags"][0]
    assert any("topic 'The Lamplighters' is in no entry" in w for w in warnings)
    assert not any("'Saltmarch' is in no entry" in w for w in warnings)


def test_a_renamed_topic_whose_text_is_there_counts_as_covered():
    draft = [{"title": "Fishing town", "lore": "A fishing town on stilts where the tide-priests keep the bells rung "
              "every hour.", "aliases": [], "canon": False},
             {"title": "Guild", "lore": "A guild of lighthouse-keepers who rule the isles from their towers by old "
              "charter.", "aliases": [], "canon": False}]
    assert draft_ground(draft, NOTES) == []


def test_generate_has_no_source_so_only_placeholders_are_checked():
    draft = [{"title": "...", "lore": "Invented on purpose: generate has no notes.", "aliases": ["…", "Isles"]}]
    warnings = draft_placeholders(draft)
    assert draft[0]["aliases"] == ["Isles"] and draft[0]["flags"] == ["its title is a placeholder, not a name"]
    assert len(warnings) == 2


def test_on_real_books_own_lore_passes_and_an_unrelated_books_lore_is_flagged():
    from bench.split_bench import corpus_books, grounding_measure
    from tests.shared_data import require_shared

    result = grounding_measure(corpus_books(require_shared("corpus")))
    assert result["own"]["flagged"] == 0.0 and result["own"]["entries"] >= 500
    assert result["edited"]["flagged"] <= 0.1
    assert result["foreign"]["flagged"] >= 0.9 and result["foreign"]["entries"] >= 100
