"""Offline extractive description summaries: every distinct description heard, bounded."""

from __future__ import annotations

import itertools

import pytest

from offline.summary import distinct_sentences, split_sentences, summarize_descriptions

ACME = [
    "Acme Corp is a steel maker based in Cleveland. It employs 4,000 people.",
    "ACME CORP is a steel maker based in Cleveland",  # another mention of a known fact
    "Acme Corp agreed to buy Bolt Rail for 120 mln dlrs in March 1987.",
    "Acme Corp reported a first-quarter loss after a strike at its Gary plant.",
    "The company's chairman, John Smith, said exports to Japan would double.",
]


class TestSentences:
    def test_split_keeps_abbreviated_numbers_together(self) -> None:
        assert split_sentences("Profit was 1.5 mln dlrs. Sales rose.  ") == [
            "Profit was 1.5 mln dlrs.",
            "Sales rose.",
        ]

    def test_near_duplicates_count_once(self) -> None:
        texts = ["Acme is a steel maker based in Ohio.", "ACME is a steel maker based in Ohio"]
        assert len(distinct_sentences(texts)) == 1


class TestSummary:
    def test_keeps_a_fact_from_each_distinct_description(self) -> None:
        summary = summarize_descriptions("ACME CORP", ACME, max_chars=1000)
        for fact in ("Cleveland", "Bolt Rail", "strike", "Japan"):
            assert fact in summary
        assert summary.count("steel maker") == 1

    def test_tight_bound_gives_each_description_a_turn_before_seconds(self) -> None:
        leads = [split_sentences(d)[0] for d in ACME[:1] + ACME[2:]]
        bound = len(" ".join(leads)) + len("ACME CORP: ") + 5  # too short for a fifth sentence
        summary = summarize_descriptions("ACME CORP", ACME, max_chars=bound)
        assert len(summary) <= bound
        for fact in ("Cleveland", "Bolt Rail", "strike", "Japan"):
            assert fact in summary
        assert "4,000" not in summary  # a second sentence of one description waits its turn

    def test_every_bound_is_respected(self) -> None:
        for bound in (20, 60, 120, 250, 400):
            summary = summarize_descriptions("ACME CORP", ACME, max_chars=bound)
            assert 0 < len(summary) <= bound

    def test_same_summary_whatever_the_order(self) -> None:
        outputs = {
            summarize_descriptions("ACME CORP", list(p), max_chars=300)
            for p in itertools.permutations(ACME)
        }
        assert len(outputs) == 1

    def test_subject_is_named(self) -> None:
        summary = summarize_descriptions("BOLT RAIL", ["The railway runs 40 trains a day."])
        assert summary.startswith("BOLT RAIL: ")
        named = summarize_descriptions(("ACME", "BOLT"), ["Acme bought Bolt.", "Acme owns Bolt."])
        assert named.startswith("Acme")

    @pytest.mark.parametrize("descriptions", [[], ["  ", ""]])
    def test_nothing_to_summarise(self, descriptions: list[str]) -> None:
        assert summarize_descriptions("X", descriptions) == ""
