"""The shipped sample corpus keeps the promises the demo and the tests rely on.

examples/news/articles.jsonl is fictional newswire written for this project: six storylines
that should become six clear communities, a few deliberate cross-links, one storyline that
bursts in the last days of March, and one phrase per article that only that article contains.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from datetime import UTC, datetime
from functools import cache
from pathlib import Path

import pytest

from graph.extraction.documents import parse_document
from graph.model import Document

CORPUS = Path(__file__).resolve().parents[2] / "examples" / "news" / "articles.jsonl"
MAX_CHARS = 500_000
BURST = "satellite-launch"
LAST_DAYS_START = datetime(2026, 3, 25, tzinfo=UTC)
BURST_QUIET_UNTIL = datetime(2026, 3, 20, tzinfo=UTC)


@cache
def corpus() -> tuple[Document, ...]:
    lines = CORPUS.read_bytes().splitlines()
    return tuple(parse_document(line, max_chars=MAX_CHARS) for line in lines if line.strip())


def meta_str(doc: Document, key: str) -> str:
    value = doc.metadata.get(key)
    assert isinstance(value, str) and value, f"{doc.id}: metadata.{key} must be a non-empty string"
    return value


def meta_list(doc: Document, key: str) -> list[str]:
    value = doc.metadata.get(key)
    assert isinstance(value, list), f"{doc.id}: metadata.{key} must be a list"
    assert all(isinstance(v, str) and v for v in value), f"{doc.id}: metadata.{key} has a non-name"
    return [str(v) for v in value]


def when(doc: Document) -> datetime:
    return datetime.fromisoformat(doc.published_at.replace("Z", "+00:00"))


def by_storyline() -> dict[str, list[Document]]:
    groups: dict[str, list[Document]] = defaultdict(list)
    for doc in corpus():
        groups[meta_str(doc, "storyline")].append(doc)
    return groups


def docs_ids() -> list[str]:
    return [doc.id for doc in corpus()]


class TestFormat:
    def test_every_line_is_a_valid_document(self) -> None:
        lines = [ln for ln in CORPUS.read_bytes().splitlines() if ln.strip()]
        assert len(corpus()) == len(lines) == 48

    def test_ids_are_unique_and_follow_the_sample_scheme(self) -> None:
        ids = docs_ids()
        assert len(set(ids)) == len(ids)
        assert all(i.startswith("sample-") for i in ids)

    def test_published_at_lies_in_march_2026(self) -> None:
        for doc in corpus():
            t = when(doc)
            assert (t.year, t.month) == (2026, 3), doc.id

    def test_titles_and_source_are_filled(self) -> None:
        for doc in corpus():
            assert doc.title, doc.id
            assert doc.source == "kgrag-sample", doc.id

    @pytest.mark.parametrize("doc_id", docs_ids())
    def test_article_length_is_short_newswire(self, doc_id: str) -> None:
        doc = next(d for d in corpus() if d.id == doc_id)
        assert 90 <= len(doc.text.split()) <= 220


class TestStorylines:
    def test_six_storylines_of_six_or_more_articles(self) -> None:
        sizes = {name: len(docs) for name, docs in by_storyline().items()}
        assert len(sizes) == 6, sizes
        assert min(sizes.values()) >= 6, sizes

    def test_each_storyline_has_a_recurring_person(self) -> None:
        for name, docs in by_storyline().items():
            counts = Counter(p for doc in docs for p in meta_list(doc, "people"))
            assert counts and counts.most_common(1)[0][1] >= 3, name

    def test_a_few_names_link_two_storylines_and_none_links_more(self) -> None:
        storylines_of: dict[str, set[str]] = defaultdict(set)
        for doc in corpus():
            for name in meta_list(doc, "people") + meta_list(doc, "orgs"):
                storylines_of[name].add(meta_str(doc, "storyline"))
        spans = Counter(len(s) for s in storylines_of.values())
        assert spans[2] >= 2, "the graph should be connected in places"
        assert max(spans) == 2, "a name in three storylines would blur the communities"
        own: Counter[str] = Counter()
        shared: Counter[str] = Counter()
        for storylines in storylines_of.values():
            for storyline in storylines:
                (own if len(storylines) == 1 else shared)[storyline] += 1
        for storyline in by_storyline():
            assert own[storyline] >= 2 * shared[storyline], f"{storyline} would not cluster"


class TestBurst:
    def test_burst_storyline_is_silent_before_the_20th(self) -> None:
        assert all(when(d) >= BURST_QUIET_UNTIL for d in by_storyline()[BURST])

    def test_burst_storyline_has_four_or_more_articles_in_the_last_four_days(self) -> None:
        recent = [d for d in by_storyline()[BURST] if when(d) >= LAST_DAYS_START]
        assert len(recent) >= 4
        assert len(recent) > len(by_storyline()[BURST]) / 2

    def test_burst_storyline_dominates_the_last_four_days(self) -> None:
        recent = Counter(meta_str(d, "storyline") for d in corpus() if when(d) >= LAST_DAYS_START)
        top, runner_up = recent.most_common(2)
        assert top[0] == BURST
        assert top[1] >= 2 * runner_up[1]


class TestUniquePhrases:
    def test_each_phrase_is_in_its_own_article(self) -> None:
        for doc in corpus():
            assert meta_str(doc, "unique_phrase").lower() in doc.text.lower(), doc.id

    def test_no_phrase_occurs_in_another_article(self) -> None:
        for doc in corpus():
            phrase = meta_str(doc, "unique_phrase").lower()
            others = [
                o.id
                for o in corpus()
                if o.id != doc.id and phrase in f"{o.title}\n{o.text}".lower()
            ]
            assert others == [], f"{doc.id}: {phrase!r} also in {others}"


class TestNamedEntities:
    def test_every_listed_person_is_named_in_full_in_the_text(self) -> None:
        for doc in corpus():
            for person in meta_list(doc, "people"):
                assert person in doc.text, f"{doc.id}: {person}"

    def test_every_listed_organisation_is_named_in_the_text(self) -> None:
        for doc in corpus():
            for org in meta_list(doc, "orgs"):
                assert org in doc.text, f"{doc.id}: {org}"

    def test_every_listed_place_is_named_in_the_text(self) -> None:
        """Case-insensitive: datelines are upper-case, as on a real wire ("VIENNA, March 2")."""
        for doc in corpus():
            for place in meta_list(doc, "places"):
                assert place.lower() in doc.text.lower(), f"{doc.id}: {place}"

    def test_recurring_people_are_later_called_by_surname_alone(self) -> None:
        """Newswire style: full name once, then the surname, which extraction must resolve."""
        for doc in corpus():
            for person in meta_list(doc, "people"):
                surname = person.split()[-1]
                if doc.text.count(surname) > 1:
                    return
        pytest.fail("no article refers to a person by surname after the first mention")
