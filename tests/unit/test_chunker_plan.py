"""The chunker's plan for one message: dead letters, re-keying, tombstones, new versions,
corrections and redeliveries, from the message and the document's known row alone."""

from __future__ import annotations

import orjson
import pytest

from agents.chunk_plan import DELETED, NO_KEY_REASON, DocumentPlan, DocumentRow, plan
from graph.model import Chunk, Document, content_id

MAX_CHARS = 10_000


def cut(doc: Document) -> list[Chunk]:
    """A toy chunker: one chunk per sentence, ids by content as the real one has them."""
    sentences = [s.strip() + "." for s in doc.text.split(".") if s.strip()]
    return [
        Chunk(
            id=content_id("chunk", doc.id, s),
            document_id=doc.id,
            title=doc.title,
            published_at=doc.published_at,
            position=i,
            text=s,
            n_tokens=len(s.split()),
        )
        for i, s in enumerate(sentences)
    ]


def message(text: str, doc_id: str = "d1") -> bytes:
    return orjson.dumps(
        {"id": doc_id, "title": "T", "text": text, "published_at": "2024-05-01T00:00:00Z"}
    )


def run(
    key: str | None, value: bytes | None, rows: dict[str, DocumentRow] | None = None
) -> DocumentPlan:
    return plan(key, value, (rows or {}).get, max_chars=MAX_CHARS, cut=cut)


def chunk_ids(text: str, doc_id: str = "d1") -> tuple[str, ...]:
    return tuple(content_id("chunk", doc_id, s.strip() + ".") for s in text.split(".") if s.strip())


class TestDeadLetters:
    @pytest.mark.parametrize(
        ("value", "reason"),
        [
            (b"", "empty message"),
            (b"\xff\xfe", "not UTF-8"),
            (b"{not json", "not JSON"),
            (b'{"id": "d1"}', "text"),
            (message("x" * (MAX_CHARS + 1)), "more than the limit"),
        ],
    )
    def test_a_bad_payload_goes_to_the_dead_letter_topic_alone(
        self, value: bytes, reason: str
    ) -> None:
        p = run("d1", value)
        assert p.dead_letter is not None and reason in p.dead_letter
        assert (p.retract, p.add, p.change, p.removed, p.row, p.rekey) == (
            (),
            (),
            None,
            False,
            None,
            False,
        )

    def test_a_tombstone_without_a_key_is_dead_lettered(self) -> None:
        assert run(None, None).dead_letter == NO_KEY_REASON
        assert run("", None).dead_letter == NO_KEY_REASON


def test_a_document_under_another_key_is_republished_under_its_id_only() -> None:
    p = run("wrong-key", message("One. Two."))
    assert p == DocumentPlan(doc_id="d1", rekey=True)
    assert run(None, message("One. Two.")) == DocumentPlan(doc_id="d1", rekey=True)


class TestVersions:
    def test_a_new_document_adds_every_chunk_and_announces_itself(self) -> None:
        p = run("d1", message("One. Two."))
        assert [c.id for c in p.add] == list(chunk_ids("One. Two."))
        assert p.retract == ()
        assert p.change is not None and p.change.id == "d1"
        assert p.row is not None and p.row.chunks == chunk_ids("One. Two.")
        assert not p.row.deleted and len(p.row.hash) == 32

    def test_the_same_version_again_sends_nothing_but_rewrites_its_row(self) -> None:
        first = run("d1", message("One. Two."))
        assert first.row is not None
        again = run("d1", message("One. Two."), {"d1": first.row})
        assert again == DocumentPlan(doc_id="d1", row=first.row)

    def test_a_correction_retracts_what_it_lacks_and_adds_only_what_is_new(self) -> None:
        first = run("d1", message("One. Two. Three."))
        assert first.row is not None
        p = run("d1", message("One. Deux. Three."), {"d1": first.row})
        assert p.retract == (content_id("chunk", "d1", "Two."),)
        assert [c.id for c in p.add] == [content_id("chunk", "d1", "Deux.")]
        assert p.change is not None and p.change.text == "One. Deux. Three."
        assert p.row is not None and p.row.chunks == chunk_ids("One. Deux. Three.")
        assert p.row.hash != first.row.hash

    def test_a_document_after_its_deletion_is_indexed_afresh(self) -> None:
        p = run("d1", message("One. Two."), {"d1": DELETED})
        assert p.retract == () and len(p.add) == 2 and p.change is not None


class TestTombstones:
    def test_a_tombstone_retracts_every_chunk_and_leaves_a_marker(self) -> None:
        row = DocumentRow(hash="h", chunks=("chunk-a", "chunk-b"))
        p = run("d1", None, {"d1": row})
        assert p == DocumentPlan(
            doc_id="d1", retract=("chunk-a", "chunk-b"), removed=True, row=DELETED
        )

    @pytest.mark.parametrize("rows", [{}, {"d1": DELETED}], ids=["never indexed", "deleted"])
    def test_a_tombstone_for_nothing_indexed_changes_nothing(
        self, rows: dict[str, DocumentRow]
    ) -> None:
        assert run("d1", None, rows) == DocumentPlan(doc_id="d1")


class TestRows:
    @pytest.mark.parametrize(
        "stored",
        [
            {"hash": "abc", "chunks": ["chunk-a", "chunk-b"]},
            {"hash": "", "chunks": [], "deleted": True},
        ],
    )
    def test_the_stored_form_round_trips(self, stored: dict[str, object]) -> None:
        assert DocumentRow.from_row(stored).as_row() == stored

    def test_the_deletion_marker_is_stored_as_before(self) -> None:
        assert DELETED.as_row() == {"hash": "", "chunks": [], "deleted": True}
