"""The offline extractor on hand-written news text: types, Reuters noise, surnames, edges."""

from __future__ import annotations

import pytest

from graph.keys import entity_key
from graph.model import Chunk, ChunkExtraction, content_id
from offline.extraction import MAX_DESCRIPTION_CHARS, extract_offline


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

    def test_dateline_city_is_a_place_and_the_date_is_nothing(self) -> None:
        types = _types("NEW YORK, March 3 - Pennzoil Co said it would appeal.")
        assert types == {"New York": "geo", "Pennzoil": "organization"}

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


class TestTitles:
    @pytest.mark.parametrize(
        ("text", "name"),
        [
            (
                "Secretary-General Idris Mahfouz told reporters the talks went well.",
                "Idris Mahfouz",
            ),
            ("The rocket is ready, Founder Kai Ostrander said on Sunday.", "Kai Ostrander"),
            ("Chair Aylin Demir said the authority would examine the deal.", "Aylin Demir"),
            ("Director-General Helga Brandt of the agency approved it.", "Helga Brandt"),
            ("Oil Minister Amira Haddad said output would rise.", "Amira Haddad"),
            ("Lakemont Managing Partner Victor Hale wrote to the board.", "Victor Hale"),
            ("Later, Chief Engineer Jonas Reinholt said the winds were strong.", "Jonas Reinholt"),
        ],
    )
    def test_title_is_cut_from_the_name_and_kept_in_the_description(
        self, text: str, name: str
    ) -> None:
        people = {e.name: e for e in _extract(text).entities if e.type == "person"}
        assert list(people) == [name]
        assert people[name].description == text

    def test_plural_title_before_an_institution_keeps_the_whole_institution(self) -> None:
        text = "Ministers of the Petroleum Exporters Council ended the first day of talks."
        assert _types(text) == {"Petroleum Exporters Council": "organization"}


class TestPeopleWithoutTitles:
    @pytest.mark.parametrize(
        "text",
        [
            "Amira Haddad said Qatar and Saudi Arabia agreed.",
            "Trade would suffer, Tuomas Virtanen told reporters on Friday.",
            "Marloes Jansen added that pickets would stay.",
            "The price is too high, according to Aylin Demir.",
            "Zorvek Pallandine said he would not resign.",
            "Zorvek Pallandine, a senior pharmaceuticals analyst at Kestrel, disagreed.",
        ],
    )
    def test_speech_verbs_first_names_and_appositions_make_a_person(self, text: str) -> None:
        assert "person" in _types(text).values()

    def test_a_name_typed_once_as_a_person_is_a_person_everywhere_in_the_chunk(self) -> None:
        text = (
            "Priya Raman, chief energy analyst at Halden Commodities, spoke.\n"
            " Later Priya Raman of Halden Commodities repeated the call."
        )
        assert _types(text)["Priya Raman"] == "person"

    def test_a_bare_speech_verb_makes_a_person_only_if_the_surname_is_used_alone(self) -> None:
        assert _types("Kaiser Cement said profits rose.") == {"Kaiser Cement": "organization"}
        text = "Zorvek Pallandine said profits rose. Pallandine added that costs fell."
        assert _types(text) == {"Zorvek Pallandine": "person"}

    def test_a_company_that_speaks_of_itself_stays_an_organisation(self) -> None:
        assert _types("Brennan Biologics said it would appeal.") == {
            "Brennan Biologics": "organization"
        }


class TestInstitutionsAndPlaces:
    @pytest.mark.parametrize(
        "name",
        [
            "Castrena School of Economics",
            "Bank of Japan",
            "Ministry of Agriculture",
            "University of Chicago",
        ],
    )
    def test_of_inside_an_institution_keeps_the_whole_name(self, name: str) -> None:
        text = f"Speaking at the {name} on Monday, Halloran said rates would rise."
        assert _types(text).get(name) == "organization"

    @pytest.mark.parametrize(
        ("text", "adjective", "place"),
        [
            (
                "The Solvan crown gained 0.9 percent, and Solvany's government was pleased.",
                "solvan",
                "solvany",
            ),
            (
                "Tarvonia's cabinet met. Tarvonian wheat was stranded at sea.",
                "tarvonian",
                "tarvonia",
            ),
        ],
    )
    def test_demonym_adjective_of_a_place_in_the_chunk_is_not_an_entity(
        self, text: str, adjective: str, place: str
    ) -> None:
        types = {entity_key(e.name): e.type for e in _extract(text).entities}
        assert adjective not in types
        assert types[place] == "geo"

    def test_names_that_merely_resemble_a_place_are_kept(self) -> None:
        text = "Halvorsen Therapeutics hired Halvorsena Partners and Marcus Feldt in Paris."
        assert {"halvorsen therapeutics", "halvorsena partners", "marcus feldt"} <= _keys(text)

    def test_capitalised_dateline_yields_the_city_and_its_country(self) -> None:
        types = _types("SKARVIK, Norway, March 21 - Kestrel Orbital will launch satellites.")
        assert types == {"Skarvik": "geo", "Norway": "geo", "Kestrel Orbital": "organization"}

    def test_dateline_city_is_linked_like_a_mention_of_the_first_sentence(self) -> None:
        text = "ALVORA, March 5 - Wheat futures on the Alvora Commodity Exchange rose."
        assert _types(text)["Alvora"] == "geo"
        assert frozenset(("Alvora", "Alvora Commodity Exchange")) in _pairs(text)

    def test_place_cues_type_unknown_places(self) -> None:
        text = (
            "Dublin-based Brennan Biologics agreed, and Kadara's Energy Minister Karim Bensaid "
            "said Veskaria's government would comment."
        )
        types = _types(text)
        assert types["Dublin"] == types["Kadara"] == types["Veskaria"] == "geo"

    @pytest.mark.parametrize("word", ["Rotterdam-bound", "Earth-observation"])
    def test_capitalised_word_with_a_lower_case_compound_is_not_a_name(self, word: str) -> None:
        keys = _keys(f"The company moved all its {word} services through Antwerp.")
        assert entity_key(word) not in keys


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
        text = "Texaco Inc sued Pennzoil Co in Houston.\n\nChevron Corp said nothing."
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


class TestAdjacentSentences:
    TEXT = (
        "Halden Commodities raised its forecast for crude. "
        "The audit mattered more than the headline, Priya Raman said."
    )

    def test_entities_of_adjacent_sentences_of_a_paragraph_get_a_weak_link(self) -> None:
        ex = _extract(self.TEXT)
        link = {frozenset((r.source, r.target)): r.strength for r in ex.relationships}
        same = _extract("Halden Commodities analyst Priya Raman raised the forecast.")
        assert link == {frozenset(("Halden Commodities", "Priya Raman")): 1.0}
        assert same.relationships[0].strength > 1.0

    def test_a_paragraph_break_or_a_sentence_between_cuts_the_link(self) -> None:
        apart = self.TEXT.replace(". ", ".\n\n")
        between = self.TEXT.replace(". ", ". Crude prices fell on Friday. ")
        assert _extract(apart).relationships == ()
        assert _extract(between).relationships == ()

    def test_a_pair_in_one_sentence_keeps_its_same_sentence_strength(self) -> None:
        text = (
            "Halden Commodities analyst Priya Raman raised the forecast. "
            "Priya Raman later spoke to Halden Commodities clients."
        )
        (rel,) = _extract(text).relationships
        assert rel.strength > 2


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


class TestWidePlaces:
    @pytest.mark.parametrize(
        ("text", "name"),
        [
            ("Exports through Omaha rose last year, traders said.", "Omaha"),
            ("The shipment reached Barbados on Friday.", "Barbados"),
        ],
    )
    def test_a_place_nothing_else_explains_is_geo_not_the_fallback(
        self, text: str, name: str
    ) -> None:
        assert _types(text).get(name) == "geo"

    def test_a_city_inside_a_company_name_stays_the_company(self) -> None:
        types = _types("Shares of Omaha Steel Corp fell sharply.")
        assert types.get("Omaha Steel") == "organization"
        assert "Omaha" not in types

    def test_an_invented_name_still_falls_back_to_an_organisation(self) -> None:
        assert _types("Exports through Qorvantis rose last year.").get("Qorvantis") == (
            "organization"
        )

    def test_a_name_starting_with_a_given_name_is_a_person_when_nothing_else_says(
        self,
    ) -> None:
        types = _types("Marguerite Olvenhaus told the forum on Tuesday that rates would rise.")
        assert types.get("Marguerite Olvenhaus") == "person"
        # a company's own words still win over its founder's given name
        assert (
            _types("Shares of Marguerite Olvenhaus Corp fell.").get("Marguerite Olvenhaus")
            == "organization"
        )

    def test_a_surname_alone_takes_the_full_name_the_given_name_made_a_person(self) -> None:
        text = (
            "Marguerite Olvenhaus told the forum that rates would rise. "
            "Olvenhaus added that the port would grow."
        )
        assert _types(text) == {"Marguerite Olvenhaus": "person"}
