"""Alias resolution (``graph.aliases.resolution``): acronyms, spellings and surnames end in one
entity with their evidence; namesakes and ambiguous acronyms stay apart; retracted evidence undoes a
merge."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

import pytest

from graph.aliases.names import spelling_key, spells
from graph.aliases.resolution import Named, confirmed, decision_id
from graph.aliases.rules import resolve


def named(
    key: str,
    name: str,
    type_: str,
    units: Iterable[str],
    mentions: int | None = None,
    *,
    person: bool = False,
    documents: Iterable[str] = (),
) -> Named:
    u = frozenset(units)
    return Named(
        key, name, type_, len(u) if mentions is None else mentions, u, person, frozenset(documents)
    )


# a person named in full in unit u1 of document d1
VOLCKER = named(
    "paul volcker", "Paul Volcker", "person", ["u1"], mentions=5, person=True, documents=["d1"]
)


def graph(
    entities: list[Named], edges: Iterable[tuple[str, str]] = ()
) -> tuple[dict[str, Named], dict[str, set[str]], dict[str, set[str]]]:
    by_key = {e.key: e for e in entities}
    units: dict[str, set[str]] = defaultdict(set)
    for e in entities:
        for u in e.units:
            units[u].add(e.key)
    near: dict[str, set[str]] = defaultdict(set)
    for a, b in edges:
        near[a].add(b)
        near[b].add(a)
    return by_key, units, near


class TestSpells:
    @pytest.mark.parametrize(
        ("letters", "key"),
        [
            ("imf", "international monetary fund"),
            ("gatt", "general agreement on tariffs and trade"),
            ("opec", "organization of petroleum exporting countries"),
            ("oecd", "organisation for economic co operation and development"),
            ("icco", "international cocoa organization"),
            ("unctad", "united nations conference on trade and development"),
        ],
    )
    def test_acronyms_spell_their_expansions(self, letters: str, key: str) -> None:
        assert spells(letters, key)

    @pytest.mark.parametrize(
        ("letters", "key"),
        [("imf", "international finance"), ("ec", "commission"), ("imf", "monetary fund")],
    )
    def test_and_not_other_names(self, letters: str, key: str) -> None:
        assert not spells(letters, key)

    def test_spelling_keys(self) -> None:
        assert spelling_key("european communities") == spelling_key("european community")
        assert spelling_key("organisation of x") == spelling_key("organization of x")
        assert spelling_key("lloyds") != spelling_key("lloyd")
        assert spelling_key("american securities") != spelling_key("american security")


class TestOrganisations:
    def test_acronym_spelling_and_plural_end_in_the_best_known_full_name(self) -> None:
        ents, units, near = graph(
            [
                named("ec", "EC", "organization", ["u1", "u2", "u3"]),
                named(
                    "european community",
                    "European Community",
                    "organization",
                    ["u1", "u2"],
                    mentions=9,
                ),
                named("european communities", "European Communities", "organization", ["u4"]),
                # two letters need two mentions together; "UN" joins "U.N." by its letters
                named("u n", "U.N.", "organization", ["u5", "u6"]),
                named("un", "UN", "organization", ["u7"]),
                named("united nations", "United Nations", "organization", ["u5", "u6"]),
            ]
        )
        res = resolve(ents, units, near)
        for key in ("ec", "european communities"):
            assert res.canonical(key) == "european community"
        for key in ("u n", "un"):
            assert res.canonical(key) == "united nations"
        assert res.merges["ec"].rule == "acronym"
        assert "2 text unit(s)" in res.merges["ec"].evidence
        assert res.aliases()["european community"] == ["ec", "european communities"]

    def test_an_acronym_two_names_spell_equally_stays_apart(self) -> None:
        ents, units, near = graph(
            [
                named("ec", "EC", "organization", ["u1", "u2"]),
                named("european community", "European Community", "organization", ["u1"]),
                named("energy commission", "Energy Commission", "organization", ["u2"]),
            ]
        )
        assert resolve(ents, units, near).canonical("ec") == "ec"

    def test_an_acronym_never_seen_beside_its_expansion_is_not_merged(self) -> None:
        ents, units, near = graph(
            [
                named("imf", "IMF", "organization", ["u1"]),
                named(
                    "international monetary fund",
                    "International Monetary Fund",
                    "organization",
                    ["u2"],
                ),
            ]
        )
        assert resolve(ents, units, near).merges == {}


class TestPeople:
    def test_a_surname_of_one_person_named_in_full_elsewhere_in_its_document(self) -> None:
        ents, units, near = graph(
            [
                named("volcker", "Volcker", "organization", ["u2"], documents=["d1"]),
                VOLCKER,
            ]
        )
        merge = resolve(ents, units, near).merges["volcker"]
        assert (merge.canonical, merge.rule) == ("paul volcker", "surname")
        assert "elsewhere in 1 of its documents" in merge.evidence

    def test_a_bare_name_better_known_than_the_only_person_bearing_it_is_left_alone(
        self,
    ) -> None:
        ents, units, near = graph(
            [
                named("dial", "Dial", "organization", ["u1", "u2", "u3"]),
                named("walter dial", "Walter Dial", "person", ["u4"], person=True),
                named("phoenix", "Phoenix", "geo", ["u1", "u4"]),
            ],
            edges=[("dial", "phoenix"), ("walter dial", "phoenix")],
        )
        assert resolve(ents, units, near).merges == {}

    def test_namesakes_stay_apart_and_a_bare_surname_goes_by_its_units_company(self) -> None:
        ents, units, near = graph(
            [
                named("james baker", "James Baker", "person", ["u1"], mentions=9, person=True),
                named("howard baker", "Howard Baker", "person", ["u2"], mentions=4, person=True),
                named("baker", "Baker", "person", ["u3", "u4", "u5"], person=True),
                named("treasury", "Treasury", "organization", ["u1", "u3"]),
                named("white house", "White House", "organization", ["u2", "u4"]),
                named("congress", "Congress", "organization", ["u5"]),
            ],
            edges=[
                ("james baker", "treasury"),
                ("howard baker", "white house"),
                ("james baker", "congress"),
                ("howard baker", "congress"),
            ],
        )
        res = resolve(ents, units, near)
        assert res.canonical("james baker") != res.canonical("howard baker")
        assert "baker" not in res.merges  # not merged whole
        assert res.canonical("baker", "u3") == "james baker"
        assert res.canonical("baker", "u4") == "howard baker"
        assert res.canonical("baker", "u5") == "baker"  # a tie: unresolved

    def test_a_bare_surname_goes_to_the_namesake_its_document_names_in_full(self) -> None:
        ents, units, near = graph(
            [
                named("james baker", "James Baker", "person", ["u1"], 9, documents=["d1"]),
                named("howard baker", "Howard Baker", "person", ["u2"], 4, documents=["d2"]),
                # u3 shares James's company, but its article is about Howard
                named("baker", "Baker", "person", ["u3", "u4"], person=True),
                named("treasury", "Treasury", "organization", ["u1", "u3"]),
            ],
            edges=[("james baker", "treasury")],
        )
        res = resolve(ents, units, near, {"u1": "d1", "u2": "d2", "u3": "d2", "u4": "d1"})
        assert res.canonical("baker", "u3") == "howard baker"
        assert res.canonical("baker", "u4") == "james baker"
        assert "in full" in res.unit_aliases[("baker", "u3")].evidence

    def test_a_bare_surname_means_the_only_established_namesake_unless_named(self) -> None:
        # "Nancy Reagan", seen once, does not make every bare "Reagan" ambiguous; a document
        # naming her in full still takes its own
        ents, units, near = graph(
            [
                named("ronald reagan", "Ronald Reagan", "person", ["u1", "u2"], documents=["d1"]),
                named("nancy reagan", "Nancy Reagan", "person", ["u3"], 1, documents=["d3"]),
                named("reagan", "Reagan", "person", ["u4", "u5"], 30, person=True),
            ]
        )
        res = resolve(ents, units, near, {"u4": "d4", "u5": "d3"})
        assert res.canonical("reagan", "u4") == "ronald reagan"
        assert res.canonical("reagan", "u5") == "nancy reagan"
        assert res.canonical("ronald reagan") != res.canonical("nancy reagan")

    def test_retracting_the_evidence_undoes_the_merge(self) -> None:
        people = [VOLCKER]
        with_evidence = graph(
            [*people, named("volcker", "Volcker", "organization", ["u2"], documents=["d1"])]
        )
        without = graph(
            [*people, named("volcker", "Volcker", "organization", ["u3"], documents=["d2"])]
        )
        assert resolve(*with_evidence).canonical("volcker") == "paul volcker"
        assert resolve(*without).canonical("volcker") == "volcker"


class TestVariants:
    def graph(self) -> tuple[dict[str, Named], dict[str, set[str]], dict[str, set[str]]]:
        return graph(
            [
                named("united states", "United States", "geo", ["u1"], documents=["d1"]),
                named("sydney", "Sydney", "geo", ["u5"], documents=["d3"]),
                named(
                    "federal reserve",
                    "Federal Reserve",
                    "organization",
                    ["u1", "u2", "u3"],
                    9,
                    documents=["d1", "d2"],
                ),
                named(
                    "u s federal reserve",
                    "U.S. Federal Reserve",
                    "organization",
                    ["u1"],
                    documents=["d1"],
                ),
                named("fed", "Fed", "organization", ["u2", "u4"], 7, documents=["d1", "d2"]),
                named("treasury", "Treasury", "organization", ["u6"], 5, documents=["d4"]),
                named(
                    "sydney treasury", "Sydney Treasury", "organization", ["u5"], documents=["d3"]
                ),
            ]
        )

    def test_variants_are_proposed_and_stand_only_once_confirmed(self) -> None:
        res = resolve(*self.graph())
        proposed = {a: (m.canonical, m.rule) for a, m in res.merges.items()}
        assert proposed == {
            "u s federal reserve": ("federal reserve", "variant"),
            "fed": ("federal reserve", "variant"),
        }
        assert all(not m.certain for m in res.merges.values())
        offline = confirmed(res, {})
        assert offline is not None and offline.merges == {}
        yes = {decision_id("fed", "federal reserve"): True}
        stands = confirmed(res, yes)
        assert stands is not None and list(stands.merges) == ["fed"]

    def test_a_one_word_remainder_and_a_place_never_mentioned_with_it_are_not_proposed(
        self,
    ) -> None:
        res = resolve(*self.graph())
        assert "sydney treasury" not in res.merges  # "Treasury" is one word
