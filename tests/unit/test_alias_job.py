"""Alias resolution in the community job: each run resolves the graph's names
(``graph.aliases.resolution``), writes the ``aliases`` table, glues each alias to its name for
Leiden, publishes an audit event per merge made or undone, and the query index reads through it."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from agents.community.runner import Runner
from core.errors import LLMError
from core.tables.opening import open_graph_store
from graph.aliases.resolution import Merge, Resolution, UnitAlias, alias_changes, decision_id
from graph.job.state import JobState
from graph.keys import entity_key
from graph.merge.changes import GraphChange
from graph.versions.legacy_format import snapshot_from_tables, snapshot_to_tables
from graph.versions.model import SnapshotAlias
from kgrag.testing.scripted_answers import answer, classify
from kgrag.testing.scripted_text import RequestRejected
from prompts import PromptLibrary, render_confirm_alias
from query.api.views import entity_view
from query.context import LocalContextConfig, named_in_window
from query.index import QueryIndex
from query.index_update import follow
from query.time_window import TimeWindow
from tests.unit.test_community_run import World, base_world, settings_for, steady_job
from tests.unit.test_index_update import assert_same
from tests.unit.test_query_support import Call, ScriptedLLM
from tests.unit.test_snapshots import make_snapshot

OTC = entity_key("Orion Trade Council")


def introduce_otc(world: World) -> None:
    """An article naming the council in full beside its acronym, and one with the acronym
    alone (each world document is one text unit)."""
    world.say(
        "doc-otc",
        [
            ("Orion Trade Council", "The Orion Trade Council (OTC) met on Monday."),
            ("OTC", "The OTC said tariffs would rise."),
        ],
        [("Orion Trade Council", "Orion B 1", "Orion B 1 chairs the Orion Trade Council.")],
    )
    world.say(
        "doc-otc-2",
        [("OTC", "OTC cut its tariff forecast.")],
        [("OTC", "Vega A 2", "OTC fined Vega A 2.")],
    )


async def test_a_run_resolves_an_acronym_audits_it_and_writes_the_table(tmp_path: Path) -> None:
    world, job = await steady_job(tmp_path)
    introduce_otc(world)
    result = await job.run(world.view)
    aliased = [e for e in result.events if e["kind"] == "aliased"]
    assert [(e["alias"], e["canonical"], e["rule"]) for e in aliased] == [("otc", OTC, "acronym")]
    assert "mentioned together in 1 text unit" in aliased[0]["evidence"]
    assert aliased[0]["title"] == "OTC = Orion Trade Council"
    assert result.aliases.merged == 1
    snap = job.snapshot()
    assert [(a.alias, a.canonical, a.rule) for a in snap.aliases] == [("otc", OTC, "acronym")]

    # glued for Leiden: one storyline, though "OTC" is related to another group's member
    def finest(key: str) -> str:
        return max(
            (c for c in job.state.communities if key in c.entity_keys), key=lambda c: c.level
        ).id

    assert finest("otc") == finest(OTC)

    # the next run reports nothing new about it
    world.say("doc-quiet", [("Vega A 2", "Vega A 2 opened a branch.")])
    again = await job.run(world.view)
    assert not [e for e in again.events if e["kind"] in ("aliased", "unaliased")]
    # resolved around the change, not afresh
    assert 0 < again.aliases.keys_decided < len(world.view.entities) / 2

    # the evidence retracted (the full name is gone from the graph): the merge is undone
    world.view.apply(GraphChange("chunk-x", "doc-x", True, deleted_entities=(OTC,)))
    undone = await job.run(world.view)
    unaliased = [e for e in undone.events if e["kind"] == "unaliased"]
    assert [(e["alias"], e["canonical"]) for e in unaliased] == [("otc", OTC)]
    assert job.snapshot().aliases == ()


async def test_the_query_index_reads_through_the_aliases(tmp_path: Path) -> None:
    world, job = await steady_job(tmp_path)
    introduce_otc(world)
    await job.run(world.view)
    index = QueryIndex.from_snapshot(job.snapshot())
    # a question naming the acronym selects the council, whose units include the acronym's
    config = LocalContextConfig()
    named = named_in_window(
        "What did the OTC say?", index=index, config=config, window=TimeWindow()
    )
    assert named[0] == OTC
    acronym_only = index.text_units_by_entity["otc"]
    assert set(acronym_only) <= set(index.entity_units(OTC))
    assert not set(acronym_only) <= set(index.text_units_by_entity[OTC])
    shown = entity_view(index, index.entities[OTC])
    assert [a["key"] for a in shown["aliases"]] == ["otc"]
    assert shown["alias_of"] is None
    alias = entity_view(index, index.entities["otc"])
    assert alias["alias_of"]["key"] == OTC and alias["alias_of"]["rule"] == "acronym"


def test_changes_between_resolutions() -> None:
    imf = Merge("imf", "international monetary fund", "acronym", "spells it")
    fund = Merge("fund", "international monetary fund", "surname", "x")
    before = Resolution(
        {"imf": imf, "fund": fund},
        {("baker", "u1"): UnitAlias("baker", "u1", "james baker", "named in full")},
    )
    after = Resolution(
        {"imf": Merge("imf", "international monetary fund", "acronym", "restated: 3 units")},
        {("baker", "u1"): UnitAlias("baker", "u1", "howard baker", "named in full")},
    )
    got = [(c.kind, c.alias, c.canonical, c.unit) for c in alias_changes(before, after)]
    assert got == [
        ("unaliased", "fund", "international monetary fund", None),  # evidence gone
        ("unaliased", "baker", "james baker", "u1"),  # re-pointed: undone, then made
        ("aliased", "baker", "howard baker", "u1"),
    ]
    # no resolution before (a graph from before aliases): every merge is made
    assert [c.kind for c in alias_changes(None, before)] == ["aliased"] * 3


async def test_a_checkpoint_from_before_aliases_resolves_the_whole_graph(tmp_path: Path) -> None:
    """The migration: a job state without a resolution (an older checkpoint) resolves every
    name on its next run and reports each merge once; stored rows are not rewritten."""
    from agents.community.state import upgrade_state

    world, job = await steady_job(tmp_path)
    introduce_otc(world)
    await job.run(world.view)
    del job.state.resolution
    job.state = upgrade_state(job.state)
    assert job.state.resolution is None
    result = await job.run(world.view)
    assert [e["alias"] for e in result.events if e["kind"] == "aliased"] == ["otc"]
    assert job.state.resolution is not None and "otc" in job.state.resolution.merges


async def test_following_versions_keeps_the_aliases_a_fresh_index_reads(tmp_path: Path) -> None:
    world, job = await steady_job(tmp_path)
    store = open_graph_store(job.settings)
    index = QueryIndex.from_snapshot(store.load())
    introduce_otc(world)
    for step, change in enumerate(
        (None, GraphChange("chunk-x", "doc-x", True, deleted_entities=(OTC,)))
    ):
        if change is not None:
            world.view.apply(change)
        await job.run(world.view)
        latest = store.resolve(None)
        index = follow(index, latest.meta, store.changes(index.version, latest.version))
        assert_same(index, QueryIndex.from_snapshot(store.load()), step)
        assert bool(index.aliases.rows) == (change is None)


def test_snapshots_keep_aliases_and_read_older_ones_without() -> None:
    snap = make_snapshot()
    alias = SnapshotAlias("otc", "otc", OTC, "OTC", "Orion Trade Council", "acronym", "why", ("u",))
    with_aliases = replace(snap, aliases=(alias,))
    tables = snapshot_to_tables(with_aliases)
    assert snapshot_from_tables(tables) == with_aliases
    assert "aliases.jsonl" not in snapshot_to_tables(snap)  # as written before aliases
    assert snapshot_from_tables(snapshot_to_tables(snap)).aliases == ()


def strict(verdict: bool | None = None) -> ScriptedLLM:
    """The scripted test LLM's answers in process (``kgrag.testing.scripted_answers``): a
    prompt it does not accept is refused as the server refuses it (HTTP 400); ``verdict``
    replaces its answer to alias confirmations."""

    def reply(call: Call) -> str:
        kind = classify(call.messages)
        try:
            text = answer(kind, call.messages)
        except RequestRejected as e:
            raise LLMError(f"HTTP 400: {e}", retryable=False) from e
        if kind == "confirm_alias" and verdict is not None:
            text = json.dumps({"same": verdict, "reason": "scripted"})
        return text

    return ScriptedLLM(reply)


def confirmations(model: ScriptedLLM) -> list[str]:
    return [c.user for c in model.calls if c.purpose == "confirm_alias"]


async def llm_run(tmp_path: Path, model: ScriptedLLM) -> tuple[World, Any]:
    world = base_world()
    settings = settings_for(tmp_path)
    state = JobState(view=world.view)
    await Runner(settings, state, llm=model, write_vectors=False).run()
    introduce_otc(world)  # one joint mention: an uncertain acronym
    result = await Runner(settings, state, llm=model, write_vectors=False).run()
    return world, (settings, state, result)


async def test_in_llm_mode_an_uncertain_alias_is_confirmed_by_the_model(tmp_path: Path) -> None:
    model = strict()
    _, (_, state, result) = await llm_run(tmp_path, model)
    [prompt] = confirmations(model)
    assert "Name A: OTC" in prompt and "Name B: Orion Trade Council" in prompt
    assert "The Orion Trade Council (OTC) met on Monday." in prompt  # the passage both share
    assert [e["alias"] for e in result.events if e["kind"] == "aliased"] == ["otc"]
    assert state.alias_verdicts == {decision_id("otc", OTC): True}


async def test_an_alias_the_model_rejects_is_not_made_and_not_asked_again(
    tmp_path: Path,
) -> None:
    model = strict(verdict=False)
    world, (settings, state, result) = await llm_run(tmp_path, model)
    assert not [e for e in result.events if e["kind"] == "aliased"]
    assert "otc" in state.resolution.merges  # the rules' decision, kept to be judged once
    assert state.names_resolved() is not None and "otc" not in state.names_resolved().merges
    assert open_graph_store(settings).load().aliases == ()
    world.say("doc-quiet", [("OTC", "OTC met again.")])
    await Runner(settings, state, llm=model, write_vectors=False).run()
    assert len(confirmations(model)) == 1


def test_the_scripted_model_refuses_a_malformed_alias_prompt() -> None:
    lib = PromptLibrary(None)
    good = render_confirm_alias(
        lib, alias="OTC", canonical="Orion Trade Council", evidence="x", passages=["OTC met."]
    )
    messages = [{"role": "user", "content": good}]
    assert classify(messages) == "confirm_alias"
    assert json.loads(answer("confirm_alias", messages)) == {
        "same": False,
        "reason": "no passage names both",
    }
    for broken in (
        good.replace("Name B: Orion Trade Council", "Name B:"),
        good.replace("[1] OTC met.", ""),
        good.split("Return a single JSON object")[0],
    ):
        with pytest.raises(RequestRejected):
            answer("confirm_alias", [{"role": "user", "content": broken}])
