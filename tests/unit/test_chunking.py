"""Chunking: window boundaries, overlap, ids and the metadata each text unit carries."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from itertools import pairwise

import pytest
from hypothesis import given
from hypothesis import strategies as st

from core.tokenizer import get_encoding
from graph.extraction.chunking import chunk_document, window_bounds
from graph.model import Chunk, Document, content_id


def char_encode(text: str) -> list[int]:
    """A toy tokenizer: one token per character, so token counts are string lengths."""
    return [ord(c) for c in text]


def char_decode(tokens: list[int]) -> str:
    return "".join(chr(t) for t in tokens)


def doc(text: str, doc_id: str = "d1") -> Document:
    return Document(
        id=doc_id, title="Title of " + doc_id, text=text, published_at="1987-03-02T00:00:00Z"
    )


def chars(text: str, *, size: int = 10, overlap: int = 3, doc_id: str = "d1") -> list[Chunk]:
    return chunk_document(
        doc(text, doc_id), encode=char_encode, decode=char_decode, size=size, overlap=overlap
    )


def distinct_text(n: int) -> str:
    """``n`` characters with no repeated 3-character window, so no window repeats."""
    alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"
    return "".join(alphabet[(i * 7 + i // len(alphabet)) % len(alphabet)] for i in range(n))


class TestBoundaries:
    def test_text_one_token_short_of_a_window_is_one_chunk(self) -> None:
        text = distinct_text(9)
        (only,) = chars(text)
        assert (only.text, only.n_tokens, only.position) == (text, 9, 0)

    def test_text_of_exactly_one_window_is_one_chunk(self) -> None:
        (only,) = chars(distinct_text(10))
        assert only.n_tokens == 10

    def test_one_token_past_a_window_adds_a_window_holding_the_overlap_and_that_token(
        self,
    ) -> None:
        text = distinct_text(11)
        first, second = chars(text)
        assert first.text == text[:10]
        assert second.text == text[7:]
        assert second.n_tokens == 4

    def test_text_that_windows_tile_exactly_has_no_tail_window(self) -> None:
        text = distinct_text(3 * 7 + 3)  # three steps of 7 plus the overlap
        got = chars(text)
        assert [c.text for c in got] == [text[0:10], text[7:17], text[14:24]]

    def test_exact_multiple_of_the_size_ends_on_the_last_token(self) -> None:
        text = distinct_text(20)
        got = chars(text)
        assert [c.n_tokens for c in got] == [10, 10, 6]
        assert got[-1].text == text[14:]

    def test_overlap_zero_gives_disjoint_windows(self) -> None:
        text = distinct_text(25)
        got = chars(text, overlap=0)
        assert "".join(c.text for c in got) == text

    @pytest.mark.parametrize("text", ["", "   ", "\n\t \n"])
    def test_empty_or_blank_text_gives_no_chunks(self, text: str) -> None:
        assert chars(text) == []

    @pytest.mark.parametrize(("size", "overlap"), [(0, 0), (10, 10), (10, 11), (10, -1)])
    def test_windows_that_cannot_advance_are_refused(self, size: int, overlap: int) -> None:
        with pytest.raises(ValueError, match="chunk"):
            chars("some text", size=size, overlap=overlap)


class TestWindowBoundsProperties:
    @given(
        n=st.integers(min_value=0, max_value=3000),
        size=st.integers(min_value=1, max_value=700),
        data=st.data(),
    )
    def test_windows_cover_the_text_and_share_exactly_the_overlap(
        self, n: int, size: int, data: st.DataObject
    ) -> None:
        overlap = data.draw(st.integers(min_value=0, max_value=size - 1))
        bounds = window_bounds(n, size, overlap)
        if n == 0:
            assert bounds == []
            return
        assert bounds[0][0] == 0
        assert bounds[-1][1] == n
        assert all(end - start == size for start, end in bounds[:-1])
        for (_, e1), (s2, e2) in pairwise(bounds):
            assert e1 - s2 == overlap  # consecutive windows share exactly the overlap
            assert e2 > e1  # and no window lies wholly inside the previous one


class TestOverlapContent:
    def test_the_end_of_each_chunk_is_the_start_of_the_next(self) -> None:
        got = chars(distinct_text(50))
        assert len(got) > 2
        for a, b in pairwise(got):
            assert a.text[-3:] == b.text[:3]

    def test_with_tiktoken_the_shared_tokens_decode_to_the_same_text(
        self, o200k: tuple[Callable[[str], list[int]], Callable[[list[int]], str]]
    ) -> None:
        encode, decode = o200k
        text = " ".join(f"Company{i} reported net profit of {i} mln dlrs." for i in range(200))
        got = chunk_document(doc(text), encode=encode, decode=decode, size=600, overlap=100)
        tokens = encode(text)
        assert [c.n_tokens for c in got[:-1]] == [600] * (len(got) - 1)
        assert sum(c.n_tokens for c in got) - 100 * (len(got) - 1) == len(tokens)
        for i, (a, b) in enumerate(pairwise(got)):
            shared = decode(tokens[(i + 1) * 500 : (i + 1) * 500 + 100])
            assert a.text.endswith(shared)
            assert b.text.startswith(shared)


class TestIdsAndMetadata:
    def test_id_is_the_content_hash_of_document_id_and_chunk_text(self) -> None:
        for c in chars(distinct_text(30)):
            assert c.id == content_id("chunk", "d1", c.text)

    def test_rechunking_unchanged_text_gives_identical_chunks(self) -> None:
        text = distinct_text(40)
        assert chars(text) == chars(text)

    def test_same_text_in_two_documents_gives_distinct_ids(self) -> None:
        text = distinct_text(40)
        ids_a = {c.id for c in chars(text, doc_id="a")}
        ids_b = {c.id for c in chars(text, doc_id="b")}
        assert len(ids_a) == 6
        assert ids_a.isdisjoint(ids_b)

    def test_editing_the_end_keeps_the_ids_of_untouched_windows(self) -> None:
        text = distinct_text(40)
        before = chars(text)
        after = chars(text[:-1] + "!")
        assert [c.id for c in before[:-1]] == [c.id for c in after[:-1]]
        assert before[-1].id != after[-1].id

    def test_chunks_carry_document_fields_and_positions(self) -> None:
        got = chars(distinct_text(30), doc_id="reuters-7")
        assert [c.position for c in got] == list(range(len(got)))
        assert {(c.document_id, c.title, c.published_at) for c in got} == {
            ("reuters-7", "Title of reuters-7", "1987-03-02T00:00:00Z")
        }
        assert [c.n_tokens for c in got] == [len(c.text) for c in got]

    def test_a_window_repeating_an_earlier_one_is_not_emitted_twice(self) -> None:
        got = chars("abcdefghij" * 4, size=10, overlap=0)
        assert [c.text for c in got] == ["abcdefghij"]
        assert got[0].position == 0

    def test_blank_windows_are_skipped_without_gaps_in_positions(self) -> None:
        got = chars("abcdefghij" + " " * 10 + "klmnopqrst", size=10, overlap=0)
        assert [(c.position, c.text) for c in got] == [(0, "abcdefghij"), (1, "klmnopqrst")]


@pytest.fixture(scope="module")
def o200k() -> tuple[Callable[[str], list[int]], Callable[[list[int]], str]]:
    with warnings.catch_warnings():
        # bpe_openai opens its data with importlib.resources' deprecated open_binary on import
        warnings.filterwarnings("ignore", "open_binary is deprecated", DeprecationWarning)
        enc = get_encoding("o200k_base")
    return enc.encode, enc.decode
