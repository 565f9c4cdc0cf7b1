"""Which text unit states which claim: GraphRAG's ``covariates.text_unit_id`` and
``text_units.covariate_ids``, from the ``claim_ids`` the claim merger sends with each change.

The claims here go through the merge rules the streaming merger applies (``graph.merge.rules``) and
``claims_changed`` with the fact ids the merger passes, into a ``GraphView``, and come out as
snapshot rows (``graph.job.version_tables.row_tables``).
"""

from __future__ import annotations

import pickle
from datetime import date

from agents.community.state import upgrade_state
from graph.job.state import JobState
from graph.job.version_tables import fresh_ids, row_tables
from graph.merge.changes import claims_changed, text_unit_added, text_unit_retracted
from graph.merge.contributions import ClaimContribution, ClaimFact
from graph.merge.rules import ClaimRows, absorb_claims, release_claims
from graph.merge.view import GraphView
from graph.model import Chunk, ChunkExtraction
from streams.codecs import decode_graph_change, encode_change


def fact(subject: str, description: str) -> ClaimFact:
    return ClaimFact(
        subject.lower(), subject.upper(), None, None, "OUTPUT CUT", "SUSPECTED",
        None, None, description, f"quote: {description}",
    )  # fmt: skip


class Claims:
    """One subject's claim rows as the merger keeps them, feeding a view."""

    def __init__(self, view: GraphView, max_claims: int = 16) -> None:
        self.view, self.max_claims = view, max_claims
        self.aggregate: dict[str, object] = {}
        self.contributions: dict[tuple[str, str], ClaimContribution] = {}

    def unit(self, chunk: str, doc: str = "doc-1") -> None:
        c = Chunk(chunk, doc, doc, "1987-03-02T09:00:00Z", 0, f"text of {chunk}", 5)
        self.view.apply(text_unit_added(ChunkExtraction(c, (), ())))

    def state(self, chunk: str, *facts: ClaimFact, doc: str = "doc-1") -> None:
        key = facts[0].subject_key
        incoming = ClaimContribution(key, tuple(sorted(facts, key=lambda f: f.id)), chunk, doc,
                                     date(1987, 3, 2))  # fmt: skip
        rows = ClaimRows(self.aggregate.get(key), self.contributions.get((key, chunk)))  # type: ignore[arg-type]
        step = absorb_claims(rows, incoming, max_claims=self.max_claims)
        self.aggregate[key] = step.rows.aggregate
        self.contributions[(key, chunk)] = incoming
        ids = tuple(f.id for f in incoming.facts)
        change = claims_changed(key, step.rows.aggregate, chunk_id=chunk, document_id=doc,
                                retraction=False, claim_ids=ids)  # fmt: skip
        self.view.apply(decode_graph_change(encode_change(change)))  # as it crosses the topic

    def retract(self, chunk: str, key: str, doc: str = "doc-1") -> None:
        stored = self.contributions.pop((key, chunk))
        step = release_claims(ClaimRows(self.aggregate.get(key), stored))  # type: ignore[arg-type]
        self.aggregate[key] = step.rows.aggregate
        self.view.apply(
            claims_changed(key, step.rows.aggregate, chunk_id=chunk, document_id=doc,
                           retraction=True, claim_ids=tuple(f.id for f in stored.facts))
        )  # fmt: skip
        self.view.apply(text_unit_retracted(chunk, doc))


def rows(view: GraphView) -> tuple[dict[str, str], dict[str, tuple[str, ...]]]:
    """claim id -> its text unit, text unit -> its claim ids."""
    state = JobState(view=view)
    state.human_ids = fresh_ids(view, state.human_ids, view.take_fresh())
    tables = row_tables(view, state)
    return (
        {c.id: c.text_unit_id for c in tables["claims"]},
        {u.id: u.covariate_ids for u in tables["text_units"]},
    )


def test_each_claim_names_a_unit_stating_it_and_each_unit_its_claims() -> None:
    view = GraphView()
    claims = Claims(view)
    cut, deal = fact("Saudi Arabia", "may cut output"), fact("Saudi Arabia", "signed a deal")
    iran = fact("Iran", "will not cut")
    for chunk in ("tu-2", "tu-1", "tu-3"):
        claims.unit(chunk)
    claims.state("tu-2", cut)
    claims.state("tu-1", cut, deal)
    claims.state("tu-3", iran)
    by_claim, by_unit = rows(view)
    assert by_claim == {cut.id: "tu-1", deal.id: "tu-1", iran.id: "tu-3"}  # the first unit
    assert by_unit == {
        "tu-1": tuple(sorted((cut.id, deal.id))),
        "tu-2": (cut.id,),
        "tu-3": (iran.id,),
    }


def test_a_retracted_unit_hands_its_claims_on_or_takes_them_away() -> None:
    view = GraphView()
    claims = Claims(view)
    cut, deal = fact("Saudi Arabia", "may cut output"), fact("Saudi Arabia", "signed a deal")
    for chunk in ("tu-1", "tu-2"):
        claims.unit(chunk)
    claims.state("tu-1", cut, deal)
    claims.state("tu-2", cut)
    view.take_fresh()
    claims.retract("tu-1", "saudi arabia")
    by_claim, by_unit = rows(view)
    assert by_claim == {cut.id: "tu-2"}  # the deal is gone with its only unit
    assert by_unit == {"tu-2": (cut.id,)}
    claims.retract("tu-2", "saudi arabia")
    assert rows(view) == ({}, {})
    assert view.claim_units == {} and view.unit_claims == {}


def displacing(first: ClaimFact) -> ClaimFact:
    """A second claim about the same subject that a row keeping one claim keeps instead."""
    for i in range(200):
        second = fact(first.subject_name, f"claim number {i}")
        trial = Claims(GraphView(), max_claims=1)
        trial.state("a", first)
        trial.state("b", second)
        if trial.aggregate[first.subject_key].facts == (second,):  # type: ignore[attr-defined]
            return second
    raise AssertionError("no claim displaces the first")


def test_a_claim_the_row_stops_keeping_moves_the_rows_of_its_units() -> None:
    view = GraphView()
    claims = Claims(view, max_claims=1)
    first = fact("Opec", "may cut output")
    second = displacing(first)
    claims.unit("tu-1")
    claims.unit("tu-2")
    claims.state("tu-1", first)
    assert rows(view) == ({first.id: "tu-1"}, {"tu-1": (first.id,), "tu-2": ()})
    claims.state("tu-2", second)
    # tu-1's row changes though the change came from tu-2: its claim is no longer kept
    assert view.take_fresh().text_units == {"tu-1", "tu-2"}
    assert rows(view) == ({second.id: "tu-2"}, {"tu-1": (), "tu-2": (second.id,)})


def test_changes_without_claim_ids_and_old_checkpoints_link_nothing() -> None:
    view = GraphView()
    claims = Claims(view)
    claims.unit("tu-1")
    cut = fact("Saudi Arabia", "may cut output")
    claims.state("tu-1", cut)
    old = claims_changed("iran", None, chunk_id="tu-1", document_id="doc-1", retraction=True)
    assert old.claim_ids is None
    view.apply(old)
    assert rows(view)[0] == {cut.id: "tu-1"}
    state = JobState(view=pickle.loads(pickle.dumps(view)))
    del vars(state.view)["claim_units"], vars(state.view)["unit_claims"]
    upgraded = upgrade_state(state)
    assert upgraded.view.claim_units == {} and upgraded.view.unit_claims == {}
    assert rows(upgraded.view) == ({cut.id: ""}, {"tu-1": ()})
