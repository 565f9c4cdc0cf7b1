"""Citation checking: only ids the model was shown survive, and removals are counted."""

from __future__ import annotations

import pytest

from query.citations import check_citations, cited_ids, format_citation

CONTEXT = {"Entities": {1, 2, 3}, "Relationships": set(range(1, 20)), "Sources": {5, 6}}


class TestRemoval:
    def test_made_up_id_is_removed_and_counted(self) -> None:
        text, removed, cited = check_citations(
            "OPEC met [Data: Entities (1, 99); Sources (5)].", CONTEXT
        )
        assert text == "OPEC met [Data: Entities (1); Sources (5)]."
        assert removed == 1
        assert cited == {"Entities": [1], "Sources": [5]}

    def test_group_left_empty_is_dropped(self) -> None:
        text, removed, _ = check_citations("X [Data: Entities (2); Reports (4)].", CONTEXT)
        assert text == "X [Data: Entities (2)]."
        assert removed == 1

    def test_block_left_empty_is_dropped_with_its_space(self) -> None:
        text, removed, cited = check_citations("Claim [Data: Sources (7, 8)]. Next.", CONTEXT)
        assert text == "Claim. Next."
        assert (removed, cited) == (2, {})

    def test_id_of_another_dataset_is_not_accepted(self) -> None:
        # 6 is a Source, not an Entity
        _, removed, cited = check_citations("[Data: Entities (6)]", CONTEXT)
        assert removed == 1 and cited == {}

    @pytest.mark.parametrize("bad", ["E1", "one", "1.5", "-3"])
    def test_non_integer_ids_are_removed(self, bad: str) -> None:
        _, removed, _ = check_citations(f"a [Data: Entities ({bad}, 2)]", CONTEXT)
        assert removed == 1

    def test_unknown_dataset_counts_all_its_ids(self) -> None:
        text, removed, _ = check_citations("a [Data: Documents (1, 2)]", CONTEXT)
        assert (text, removed) == ("a", 2)

    def test_text_without_citations_is_unchanged(self) -> None:
        plain = "No citations here (really), [but] brackets."
        assert check_citations(plain, CONTEXT) == (plain, 0, {})


class TestFormat:
    def test_at_most_five_ids_then_more(self) -> None:
        text, removed, cited = check_citations(
            "x [Data: Relationships (1, 2, 3, 4, 5, 6, 7)]", CONTEXT
        )
        assert text == "x [Data: Relationships (1, 2, 3, 4, 5, +more)]"
        assert removed == 0
        assert cited["Relationships"] == [1, 2, 3, 4, 5]

    def test_more_marker_kept_only_while_ids_remain(self) -> None:
        kept, _, _ = check_citations("x [Data: Sources (5, +more)]", CONTEXT)
        gone, removed, _ = check_citations("x [Data: Sources (77, +more)]", CONTEXT)
        assert kept == "x [Data: Sources (5, +more)]"
        assert (gone, removed) == ("x", 1)

    def test_aliases_and_case_are_normalised(self) -> None:
        text, _, cited = check_citations("x [data: entity (1), sources(5, 5)]", CONTEXT)
        assert text == "x [Data: Entities (1); Sources (5)]"
        assert cited == {"Entities": [1], "Sources": [5]}

    def test_cited_collects_ids_across_blocks_once(self) -> None:
        _, _, cited = check_citations(
            "a [Data: Entities (2, 1)] b [Data: Entities (1, 3)]", CONTEXT
        )
        assert cited == {"Entities": [2, 1, 3]}

    def test_format_citation_round_trips_through_the_checker(self) -> None:
        citation = format_citation(
            [("Entities", [1, 2]), ("Sources", []), ("Relationships", list(range(1, 9)))]
        )
        assert citation == " [Data: Entities (1, 2); Relationships (1, 2, 3, 4, 5, +more)]"
        assert check_citations("a" + citation, CONTEXT).text == "a" + citation
        assert cited_ids(citation) == {"Entities": [1, 2], "Relationships": [1, 2, 3, 4, 5]}


def test_checking_twice_changes_nothing_more() -> None:
    once = check_citations("a [Data: Entities (1, 9); Sources (5, 6, 8)] b", CONTEXT)
    twice = check_citations(once.text, CONTEXT)
    assert twice.text == once.text and twice.removed == 0
