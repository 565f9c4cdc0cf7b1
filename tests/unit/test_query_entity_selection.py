"""Which entity a question names first: the question's proper-noun phrase against the
entity's whole name or a person's surname is strong evidence; a name matched through a
lower-case word of the question, or through words of different phrases, is not; acronyms
are aliases when mentioned together with the name."""

from __future__ import annotations

from query.entity_names import NameIndex, named_entities, phrases

PERSONS = {"gholamreza aqazadeh", "michael wilson", "paul volcker", "james baker", "howard baker"}
NAMES = [
    "majestic crude",
    "gholamreza aqazadeh",
    "minister aqazadeh",
    "oil world",
    "world bank",
    "toronto world bank",
    "world trade center",
    "european community",
    "european economic community",
    "ec",
    "international monetary fund",
    "imf",
    "international marketing fund",
    "robin leigh pemberton",
    "lp",
    "michael wilson",
    "wilson foods",
    "general foods",
    "kraft foods",
    "united foods",
    "king instrument",
    "fahd",
    "fed",
    "fed funds",
    "federal reserve",
    "paul volcker",
    "james baker",
    "howard baker",
    "natural gas",
    "oil",
]
FREQUENCY = {"james baker": 5, "wilson foods": 50, "international marketing fund": 1, "lp": 9}
UNITS = {
    "european community": ("u1", "u2"),
    "ec": ("u2", "u3"),
    "imf": ("u4",),
    "international monetary fund": ("u4", "u5"),
    "international marketing fund": ("u9",),
    "robin leigh pemberton": ("u6",),
    "lp": ("u7",),
}


def pick(question: str, limit: int = 10) -> list[str]:
    return named_entities(
        question,
        NameIndex.build(NAMES),
        lambda k: FREQUENCY.get(k, 0),
        limit=limit,
        is_person=lambda k: k in PERSONS,
        units=lambda k: UNITS.get(k, ()),
    )


class TestPhrases:
    def test_case_cuts_a_cased_question(self) -> None:
        found = phrases("What happened involving Bank for International Settlements in crude oil?")
        assert [(p.words, p.proper) for p in found] == [
            (("bank", "for", "international", "settlements"), True),
            (("crude", "oil"), False),
        ]

    def test_a_lower_case_question_has_only_proper_phrases(self) -> None:
        found = phrases("what happened involving aqazadeh in crude oil")
        assert [(p.words, p.proper) for p in found] == [
            (("aqazadeh",), True),
            (("crude", "oil"), True),
        ]

    def test_capitals_mark_an_acronym_only_in_a_question_not_shouted(self) -> None:
        assert [p.acronym for p in phrases("What did the IMF say?")] == [True]
        assert [p.acronym for p in phrases("WHAT DID THE IMF SAY")] == [False]


class TestStrongEvidenceFirst:
    def test_the_surname_beats_a_name_matched_through_a_lower_case_word(self) -> None:
        found = pick("What happened involving Aqazadeh in crude oil?")
        assert found[0] == "gholamreza aqazadeh"
        assert "majestic crude" not in found

    def test_a_lower_case_question_still_puts_the_surname_first(self) -> None:
        found = pick("what happened involving aqazadeh in crude oil")
        assert found[0] == "gholamreza aqazadeh"

    def test_the_whole_name_beats_names_sharing_one_of_its_words(self) -> None:
        for topic in ("crude oil", "trade"):
            found = pick(f"What happened involving World Bank in {topic}?")
            assert found[:2] == ["world bank", "toronto world bank"]
            assert "world trade center" not in found  # "world" and "trade": two phrases

    def test_words_of_the_topic_do_not_lengthen_a_match(self) -> None:
        found = pick("What happened involving European Community in economic growth?")
        assert found[0] == "european community"
        assert found.index("european community") < found.index("european economic community")

    def test_a_person_surname_beats_an_organisation_sharing_it(self) -> None:
        assert pick("What did Wilson say?")[:2] == ["michael wilson", "wilson foods"]

    def test_the_more_specific_word_of_a_phrase_wins(self) -> None:
        assert pick("What happened involving King Fahd in oil?")[0] == "fahd"

    def test_a_free_question(self) -> None:
        assert pick("What did the Fed chairman say about rates?") == ["fed"]

    def test_each_name_of_a_phrase_comes_before_the_namesakes(self) -> None:
        found = pick("What did Volcker and Baker say about the dollar?")
        assert set(found[:2]) == {"paul volcker", "james baker"}  # Howard Baker: less mentioned
        assert found[2:] == ["howard baker"]


class TestAcronyms:
    def test_the_acronym_of_a_named_phrase_follows_it(self) -> None:
        assert pick("What happened involving European Community in trade?")[:2] == [
            "european community",
            "ec",
        ]

    def test_a_word_in_capitals_brings_its_co_mentioned_expansion(self) -> None:
        assert pick("What did the IMF say?") == ["imf", "international monetary fund"]

    def test_an_acronym_never_mentioned_with_the_name_is_not_an_alias(self) -> None:
        assert "lp" not in pick("What happened involving Leigh Pemberton in acquisitions?")

    def test_without_text_units_there_are_no_aliases(self) -> None:
        found = named_entities(
            "What did the IMF say?", NameIndex.build(NAMES), lambda k: 0, limit=5
        )
        assert found == ["imf"]
