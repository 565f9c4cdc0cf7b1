"""The offline extractor on hand-written news text: types, Reuters noise, surnames, edges."""

from __future__ import annotations

import pytest

from graph.keys import entity_key
from graph.model import Chunk, ChunkExtraction, content_id
from graph.offline_extraction import MAX_DESCRIPTION_CHARS, extract_offline


def _chunk(text: str, doc_id: str = "reuters-test") -> Chunk:
    return Chunk(
        id=content_id("chunk", doc_id, text),
        document_id=doc_id,
        title="",
        published_at="1987-03-03T12:00:00Z",
        position=0,
        text=text,
        n_tokens=len(text.split()),
    )


def _extract(text: str, **kwargs: tuple[str, ...]) -> ChunkExtraction:
    return extract_offline(_chunk(text), **kwargs)


def _types(text: str) -> dict[str, str]:
    """Entity name -> type."""
    return {e.name: e.type for e in _extract(text).entities}


def _keys(text: str) -> set[str]:
    return {entity_key(e.name) for e in _extract(text).entities}


def _pairs(text: str) -> set[frozenset[str]]:
    return {frozenset((r.source, r.target)) for r in _extract(text).relationships}


class TestTyping:
    def test_title_makes_a_person_and_is_not_part_of_the_name(self) -> None:
        types = _types("Prices fell after Treasury Secretary James Baker spoke on Monday.")
        assert types["James Baker"] == "person"
        assert "Treasury Secretary James Baker" not in types

    def test_institution_before_a_title_is_kept_as_an_organisation(self) -> None:
        types = _types("He met Federal Reserve Board Chairman Paul Volcker in the morning.")
        assert types == {"Federal Reserve Board": "organization", "Paul Volcker": "person"}

    @pytest.mark.parametrize(
        ("text", "name"),
        [
            ("Shares of Texaco Inc fell sharply.", "Texaco"),
            ("The loan came from Lloyds Bank PLC last year.", "Lloyds Bank"),
            ("A decision by the Bank of Japan was expected.", "Bank of Japan"),
            ("He said the Finance Ministry would act.", "Finance Ministry"),
            (
                "It filed with the Securities and Exchange Commission.",
                "Securities and Exchange Commission",
            ),
            ("Ministers of OPEC will meet next week.", "OPEC"),
            ("He said <Allegheny International Inc> agreed.", "Allegheny International"),
        ],
    )
    def test_organisations_by_suffix_head_acronym_or_markup(self, text: str, name: str) -> None:
        assert _types(text).get(name) == "organization"

    def test_bare_corporate_suffix_is_stripped_so_short_and_long_forms_share_a_key(self) -> None:
        keys = _keys("Chrysler Corp said it would close a plant, and later Chrysler denied it.")
        assert keys == {"chrysler"}

    def test_gazetteer_places_are_geo_with_canonical_names(self) -> None:
        types = _types(
            "Exports from the U.S. to Japan and West Germany rose, officials in Tokyo said."
        )
        assert types == {
            "United States": "geo",
            "Japan": "geo",
            "West Germany": "geo",
            "Tokyo": "geo",
        }

    def test_event_words_make_events(self) -> None:
        assert _types("Leaders will discuss debt at the Venice Summit in June.") == {
            "Venice Summit": "event"
        }

    def test_entity_types_restrict_the_output(self) -> None:
        ex = _extract(
            "Treasury Secretary James Baker met bankers from Citicorp in London.",
            entity_types=("person",),
        )
        assert [(e.name, e.type) for e in ex.entities] == [("James Baker", "person")]
        assert ex.relationships == ()


class TestReutersNoise:
    def test_table_rows_yield_no_entities(self) -> None:
        text = (
            "Shr loss 14 cts vs loss 27 cts\n Net loss 850,000 vs loss 1,400,000\n"
            " Revs 2,280,000 vs 2,220,000\n Nine Mths\n Shr profit 1.06 dlrs vs 90 cts\n Reuter\n"
        )
        assert _extract(text).entities == ()

    def test_table_rows_next_to_prose_add_nothing(self) -> None:
        text = (
            "Comdisco Inc said its quarter was strong.\n"
            " Shr 45 cts vs 30 cts\n Net 5.6 mln vs 4.1 mln\n"
        )
        assert _keys(text) == {"comdisco"}

    def test_dateline_city_is_not_an_entity(self) -> None:
        assert _keys("NEW YORK, March 3 - Pennzoil Co said it would appeal.") == {"pennzoil"}

    def test_sentence_initial_capitals_are_not_entities(self) -> None:
        text = (
            "The dollar fell. In early trading it slipped again. But dealers were calm.\n"
            " Showers were expected. Analysts expect more."
        )
        assert _extract(text).entities == ()

    def test_all_caps_headline_gives_only_gazetteer_places(self) -> None:
        assert _types("OPEC OIL MINISTERS TO MEET IN VIENNA\n The talks begin soon.") == {
            "Vienna": "geo"
        }

    def test_months_weekdays_and_trailers_are_never_entities(self) -> None:
        text = "Payment is due on Monday, March 23, the company said.\n REUTER\n"
        assert _extract(text).entities == ()

    def test_possessive_ends_a_name(self) -> None:
        types = _types("Officials in Rome said Bettino Craxi's Socialist Party would not serve.")
        assert types["Bettino Craxi"] == "person"
        assert types["Socialist Party"] == "organization"

    def test_hyphenated_surnames_stay_whole(self) -> None:
        text = "Bank of England Governor Robin Leigh-Pemberton said rates were right."
        assert _types(text)["Robin Leigh-Pemberton"] == "person"

    def test_middle_initials_are_dropped_so_forms_of_a_name_merge(self) -> None:
        text = "Secretary James A. Baker spoke, and later James Baker spoke again."
        assert _keys(text) == {"james baker"}


class TestSurnames:
    def test_surname_alone_resolves_to_the_full_name_given_in_the_chunk(self) -> None:
        text = (
            "Treasury Secretary James Baker met finance ministers on Sunday.\n"
            " The dollar had fallen enough, Baker said."
        )
        ex = _extract(text)
        assert [e.name for e in ex.entities if e.type == "person"] == ["James Baker"]
        assert "baker" not in {entity_key(e.name) for e in ex.entities}

    def test_surname_seen_before_the_full_name_resolves_too(self) -> None:
        text = "Officials said Mr Baker was in Paris. Secretary James Baker arrived late."
        assert "James Baker" in _types(text) and "Baker" not in _types(text)

    def test_ambiguous_surname_is_left_alone(self) -> None:
        text = (
            "Treasury Secretary James Baker and chief of staff Howard Baker met on Friday.\n"
            " Officials said Mr Baker left early."
        )
        names = {e.name for e in _extract(text).entities}
        assert {"James Baker", "Howard Baker", "Baker"} <= names


class TestRelationships:
    def test_only_entities_of_the_same_sentence_are_linked(self) -> None:
        text = "Texaco Inc sued Pennzoil Co in Houston. Chevron Corp said nothing."
        assert _pairs(text) == {
            frozenset(("Texaco", "Pennzoil")),
            frozenset(("Texaco", "Houston")),
            frozenset(("Pennzoil", "Houston")),
        }

    def test_closer_names_get_a_stronger_link(self) -> None:
        text = (
            "Texaco Inc and Pennzoil Co were said by several lawyers close to the long and "
            "bitter dispute to be preparing new court filings in Houston."
        )
        strength = {
            frozenset((r.source, r.target)): r.strength for r in _extract(text).relationships
        }
        near = strength[frozenset(("Texaco", "Pennzoil"))]
        far = strength[frozenset(("Texaco", "Houston"))]
        assert 1 <= far < near <= 10

    def test_a_pair_named_in_several_sentences_is_one_stronger_relationship(self) -> None:
        once = "Talks between Japan and Brazil on coffee ended without an agreement on prices."
        twice = once + " Officials from Japan said Brazil had asked for more time."
        one = _extract(once).relationships
        two = _extract(twice).relationships
        assert len(one) == len(two) == 1
        assert two[0].strength > one[0].strength

    def test_relationships_name_extracted_entities(self) -> None:
        ex = _extract(
            "President Reagan met Prime Minister Yasuhiro Nakasone in Washington on trade."
        )
        names = {e.name for e in ex.entities}
        assert ex.relationships
        assert all(r.source in names and r.target in names for r in ex.relationships)


class TestInvariants:
    TEXT = (
        "WASHINGTON, March 3 - Treasury Secretary James Baker said the Group of Five "
        "would meet in Paris. Baker told reporters that Japan and West Germany must do more, "
        "and Federal Reserve Board Chairman Paul Volcker agreed.\n Citicorp Inc and Chase "
        "Manhattan Corp declined to comment. Reuter\n"
    )

    def test_same_chunk_gives_the_same_extraction(self) -> None:
        assert _extract(self.TEXT) == _extract(self.TEXT)

    def test_one_mention_per_entity_key_labelled_offline_with_the_chunk_id(self) -> None:
        chunk = _chunk(self.TEXT)
        ex = extract_offline(chunk)
        keys = [entity_key(e.name) for e in ex.entities]
        assert len(keys) == len(set(keys)) and keys
        assert ex.mode == "offline"
        assert {e.chunk_id for e in ex.entities} | {r.chunk_id for r in ex.relationships} == {
            chunk.id
        }

    def test_descriptions_come_from_the_mentioning_sentences_and_are_bounded(self) -> None:
        long_sentence = (
            "Lenders such as Citicorp and Chemical Bank said "
            + "the outlook for lending was uncertain, " * 30
            + "it said."
        )
        for text in (self.TEXT, long_sentence):
            ex = _extract(text)
            descriptions = [e.description for e in ex.entities]
            descriptions += [r.description for r in ex.relationships]
            assert descriptions
            assert all(0 < len(d) <= MAX_DESCRIPTION_CHARS for d in descriptions)
        volcker = next(e for e in _extract(self.TEXT).entities if e.name == "Paul Volcker")
        assert "Volcker agreed" in volcker.description

    def test_strengths_are_within_graphrags_scale(self) -> None:
        assert all(1 <= r.strength <= 10 for r in _extract(self.TEXT).relationships)
