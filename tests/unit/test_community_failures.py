"""One refused LLM call costs one item, never the run; summaries follow material change.

The community job's ``Runner`` runs in process over the storylines of ``test_community_run``
with a small in-process LLM that writes well-formed reports and summaries, and refuses (as a
content filter does, with a non-retryable ``LLMError``) or garbles the ones it is told to.
The job's parent loop is tested for a child process that dies.
"""

from __future__ import annotations

import asyncio
import json
import os
import pickle
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

import agents.community.runner as runner_module
from agents.community.job import CommunityJob, RunFailed
from agents.community.result import RunResult
from agents.community.runner import Runner
from agents.community.state import upgrade_state
from core.errors import LLMError
from graph.job.state import JobState, SummaryRecord
from graph.keys import entity_key
from graph.merge.changes import GraphChange
from graph.protocols import ChatResult
from tests.unit.test_community_run import World, base_world, leaf_of, settings_for


@dataclass
class ScriptedModel:
    """Writes a report naming the first entity row of its context, and a summary joining the
    descriptions; refuses or garbles a request whose prompt contains one of the given words."""

    refuse: set[str] = field(default_factory=set)
    garble: set[str] = field(default_factory=set)
    only: str | None = None  # refuse and garble only requests whose purpose starts so
    calls: Counter[str] = field(default_factory=Counter)

    async def chat(
        self,
        messages: Sequence[dict[str, str]],
        *,
        json_mode: bool = False,
        max_tokens: int | None = None,
        purpose: str = "chat",
    ) -> ChatResult:
        prompt = messages[-1]["content"]
        self.calls[purpose] += 1
        real = prompt.split("=== Real data ===")[-1]
        if self.only is not None and not purpose.startswith(self.only):
            real = ""
        if any(word in real for word in self.refuse):
            raise LLMError("HTTP 400: the response was filtered (content policy)", retryable=False)
        if any(word in real for word in self.garble):
            return ChatResult("Sure! Here is a report: it is about many things.")
        report = {
            "title": "A community",
            "summary": "It is a community [Data: Entities (1)].",
            "rating": 3.0,
            "rating_explanation": "Some impact.",
            "findings": [{"summary": "One finding", "explanation": "Explained."}],
        }
        if purpose == "community_report":
            return ChatResult(json.dumps(report))
        if purpose == "community_reports":
            ids = re.findall(r"^Community: (\S+)$", real, re.M)
            return ChatResult(json.dumps({"reports": [{"community": i, **report} for i in ids]}))
        return ChatResult(f"summary #{self.calls[purpose]}")

    async def forget(self, messages: Sequence[dict[str, str]], **kw: Any) -> bool:
        return False

    async def aclose(self) -> None:
        return None


@dataclass
class LLMJob:
    settings: Any
    model: ScriptedModel
    state: JobState = field(default_factory=JobState)
    last: RunResult | None = None

    async def run(self, world: World) -> RunResult:
        self.state.view = world.view
        self.last = await Runner(
            self.settings, self.state, llm=self.model, write_vectors=False
        ).run()
        return self.last

    def report(self, cid: str) -> Any:
        return self.state.reports[cid]


def at(monkeypatch: pytest.MonkeyPatch, now: float) -> None:
    """The runner's wall clock (backoffs and summary ages) reads ``now``."""
    monkeypatch.setattr(runner_module.time, "time", lambda: now)


class TestRefusedReports:
    async def test_a_refused_report_costs_that_report_and_the_run_completes(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        at(monkeypatch, 1000.0)
        job = LLMJob(settings_for(tmp_path), ScriptedModel(refuse={"Vega A 1"}))
        result = await job.run(base_world())
        refused = {c.id for c in job.state.communities if entity_key("Vega A 1") in c.entity_keys}
        assert refused, "the refused entity sits in a desk and a group"
        assert set(result.failed_this_run) == {f"report:{cid}" for cid in refused}
        for cid in refused:
            assert job.report(cid).mode == "offline"  # a stand-in, marked as such
            failure = result.failures[f"report:{cid}"]
            assert "filtered" in failure.reason and failure.attempts == 1
            assert failure.next_retry_at == 1000.0 + job.settings.community.retry_base_s
        others = {c.id for c in job.state.communities} - refused
        assert others and all(job.report(cid).mode == "llm" for cid in others)
        assert result.next_due_at == 1000.0 + job.settings.community.retry_base_s

    async def test_a_refused_item_waits_for_its_backoff_then_is_retried(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        at(monkeypatch, 1000.0)
        model = ScriptedModel(refuse={"Vega A 1"})
        job = LLMJob(settings_for(tmp_path), model)
        world = base_world()
        await job.run(world)
        refused = {i.split(":", 1)[1] for i in job.state.failures if i.startswith("report:")}
        calls = model.calls["community_report"]
        at(monkeypatch, 1010.0)  # before the retry is due: no call for them
        result = await job.run(world)
        assert model.calls["community_report"] == calls and result.regenerated == 0
        at(monkeypatch, 1000.0 + 31)  # due, and refused again: the wait doubles
        result = await job.run(world)
        assert model.calls["community_report"] == calls + len(refused)
        f = result.failures[f"report:{next(iter(refused))}"]
        assert f.attempts == 2 and f.next_retry_at == 1031.0 + 60
        model.refuse.clear()
        at(monkeypatch, 1100.0)  # due, and written this time
        result = await job.run(world)
        assert result.failures == {} and result.next_due_at is None
        assert all(job.report(cid).mode == "llm" for cid in refused)

    async def test_a_refused_regeneration_keeps_the_previous_report(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        at(monkeypatch, 1000.0)
        model = ScriptedModel(only="community_report")
        job = LLMJob(settings_for(tmp_path, materiality_threshold=0.05), model)
        world = base_world()
        await job.run(world)
        leaf = leaf_of(job.state.communities, entity_key("Orion B 1"))
        before = job.report(leaf.id)
        world.say("doc-fine", [("Orion B 1", "Orion B 1 was fined by the regulator.")])
        model.refuse.add("Orion B 1")
        result = await job.run(world)
        assert f"report:{leaf.id}" in result.failed_this_run
        kept = job.report(leaf.id)
        assert (kept.title, kept.mode, kept.generated_in) == (
            before.title,
            "llm",
            before.generated_in,
        )
        assert kept.unreflected > 0  # the snapshot says the report misses something
        assert not any(e["community_id"] == leaf.id for e in result.events)

    async def test_an_answer_that_never_parses_is_a_refusal_with_its_reason(
        self, tmp_path: Path
    ) -> None:
        job = LLMJob(
            settings_for(tmp_path, report_batch_size=1),
            ScriptedModel(garble={"Lyra 2"}, only="community_report"),
        )
        result = await job.run(base_world())
        garbled = [i for i in result.failed_this_run if i.startswith("report:")]
        assert garbled
        assert all("did not parse" in result.failures[i].reason for i in garbled)
        assert result.llm_calls["community_report"] == len(job.state.communities) + len(
            garbled
        )  # one retry each


class TestBatchedReports:
    async def test_small_communities_share_calls_and_every_report_is_written(
        self, tmp_path: Path
    ) -> None:
        model = ScriptedModel()
        job = LLMJob(settings_for(tmp_path), model)
        result = await job.run(base_world())
        communities = job.state.communities
        assert all(job.report(c.id).mode == "llm" for c in communities)
        calls = result.llm_calls
        assert calls.get("community_reports", 0) >= 2
        assert calls["community_reports"] + calls.get("community_report", 0) < len(communities)

    async def test_a_run_says_what_its_calls_cost(self, tmp_path: Path) -> None:
        class Priced(ScriptedModel):
            async def chat(self, messages: Sequence[dict[str, str]], **kw: Any) -> ChatResult:
                text = (await super().chat(messages, **kw)).text
                return ChatResult(text, prompt_tokens=1_000, completion_tokens=100)

        job = LLMJob(settings_for(tmp_path), Priced())
        result = await job.run(base_world())
        calls = sum(result.llm_calls.values())
        assert calls and result.llm_tokens == {
            "prompt": 1_000 * calls,
            "completion": 100 * calls,
        }
        # the default chat model, gpt-4o-mini: $0.15 in, $0.60 out per million tokens
        assert result.cost_usd == pytest.approx(calls * (1_000 * 0.15 + 100 * 0.60) / 1e6)

    async def test_a_refused_batch_is_written_one_by_one(self, tmp_path: Path) -> None:
        model = ScriptedModel(refuse={"Lyra 2"}, only="community_report")
        job = LLMJob(settings_for(tmp_path), model)
        result = await job.run(base_world())
        refused = {c.id for c in job.state.communities if entity_key("Lyra 2") in c.entity_keys}
        assert set(result.failed_this_run) == {f"report:{cid}" for cid in refused}
        assert all(
            job.report(c.id).mode == "llm" for c in job.state.communities if c.id not in refused
        )

    @pytest.mark.parametrize(
        ("tokens", "groups"),
        [
            ([100, 100, 100], [[0, 1, 2]]),
            ([100, 2000, 100], [[1], [0, 2]]),
            ([100] * 7, [[0, 1, 2, 3, 4], [5, 6]]),
            ([900, 900, 900], [[0, 1], [2]]),
            ([], []),
        ],
        ids=["small-together", "large-alone", "size-cap", "budget-cap", "none"],
    )
    def test_report_groups(self, tokens: list[int], groups: list[list[int]]) -> None:
        from graph.job.run import report_groups

        got = report_groups(tokens, small=1500, size=5, budget=2000)
        assert sorted(got) == sorted(groups)
        assert sorted(i for g in got for i in g) == list(range(len(tokens)))


class TestSummaries:
    async def test_a_refused_summary_keeps_the_previous_text_and_is_retried(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        at(monkeypatch, 1000.0)
        model = ScriptedModel(only="summarize")
        job = LLMJob(settings_for(tmp_path, summary_join_max_tokens=0), model)
        world = base_world()
        world.say("doc-2", [("Orion A 1", "Orion A 1 opened an office in Lagos.")])
        await job.run(world)
        slot = f"e:{entity_key('Orion A 1')}"
        first = job.state.summaries[slot].text
        for i in range(3):
            world.say(f"doc-more-{i}", [("Orion A 1", f"Orion A 1 hired {i} traders in Lima.")])
        model.refuse.add("traders in Lima")
        result = await job.run(world)
        assert f"summary:{slot}" in result.failed_this_run
        assert job.state.summaries[slot].text == first
        model.refuse.clear()
        at(monkeypatch, 1000.0 + 31)
        await job.run(world)
        assert job.state.summaries[slot].text != first
        assert f"summary:{slot}" not in job.state.failures

    async def test_a_summary_is_redone_only_when_its_new_descriptions_are_material(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Share 0.5: a summary of four descriptions waits for two it has not seen."""
        at(monkeypatch, 1000.0)
        model = ScriptedModel()
        job = LLMJob(
            settings_for(tmp_path, summary_new_share=0.5, summary_join_max_tokens=0), model
        )
        world = base_world()
        for i in range(3):
            world.say(f"doc-base-{i}", [("Vega B 2", f"Vega B 2 shipped cargo number {i}.")])
        await job.run(world)
        slot = f"e:{entity_key('Vega B 2')}"
        record = job.state.summaries[slot]
        assert len(record.basis) == 4
        world.say("doc-new-1", [("Vega B 2", "Vega B 2 lost a contract in Oslo.")])
        result = await job.run(world)
        assert job.state.summaries[slot] == record and result.summaries_deferred >= 1
        assert result.next_due_at == 1000.0 + job.settings.community.summary_max_age_s
        world.say("doc-new-2", [("Vega B 2", "Vega B 2 won a contract in Bergen.")])
        result = await job.run(world)
        assert job.state.summaries[slot].basis == record.basis | {
            "Vega B 2 lost a contract in Oslo.",
            "Vega B 2 won a contract in Bergen.",
        }
        assert result.llm_calls["summarize_descriptions"] == 1

    async def test_a_summary_missing_something_is_redone_once_it_is_old(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        at(monkeypatch, 1000.0)
        job = LLMJob(
            settings_for(tmp_path, summary_max_age_s=600, summary_join_max_tokens=0),
            ScriptedModel(),
        )
        world = base_world()
        for i in range(3):
            world.say(f"doc-base-{i}", [("Vega B 2", f"Vega B 2 shipped cargo number {i}.")])
        await job.run(world)
        slot = f"e:{entity_key('Vega B 2')}"
        world.say("doc-new-1", [("Vega B 2", "Vega B 2 lost a contract in Oslo.")])
        await job.run(world)
        assert "Vega B 2 lost a contract in Oslo." not in job.state.summaries[slot].basis
        at(monkeypatch, 1601.0)
        await job.run(world)
        assert "Vega B 2 lost a contract in Oslo." in job.state.summaries[slot].basis

    async def test_short_description_sets_are_joined_without_a_call(self, tmp_path: Path) -> None:
        model = ScriptedModel()
        job = LLMJob(settings_for(tmp_path, summary_join_max_tokens=40), model)
        world = base_world()
        world.say("doc-2", [("Vega B 2", "Vega B 2 shipped grain to Riga")])
        await job.run(world)
        slot = f"e:{entity_key('Vega B 2')}"
        record = job.state.summaries[slot]
        assert (record.by, model.calls["summarize_descriptions"]) == ("joined", 0)
        assert "Vega B 2 shipped grain to Riga." in record.text
        for i in range(3):
            world.say(f"doc-{i}", [("Vega B 2", f"Vega B 2 sold {i} tankers to a Lisbon buyer.")])
        await job.run(world)
        assert job.state.summaries[slot].by == "llm"  # now too long to show as it is
        assert model.calls["summarize_descriptions"] == 1

    async def test_the_summary_of_a_deleted_row_goes_with_it(self, tmp_path: Path) -> None:
        """Runs visit only touched slots; a deleted row's slot is touched, so its summary is
        dropped in the next run while untouched summaries stay."""
        job = LLMJob(settings_for(tmp_path, summary_join_max_tokens=0), ScriptedModel())
        world = base_world()
        for name in ("Vega B 2", "Orion A 1"):
            for i in range(2):
                world.say(f"doc-{name}-{i}", [(name, f"{name} shipped cargo number {i}.")])
        await job.run(world)
        gone, kept = f"e:{entity_key('Vega B 2')}", f"e:{entity_key('Orion A 1')}"
        assert {gone, kept} <= set(job.state.summaries)
        world.view.apply(GraphChange("chunk-x", "doc-x", True, deleted_entities=(gone[2:],)))
        await job.run(world)
        assert gone not in job.state.summaries and kept in job.state.summaries

    def test_an_old_checkpoint_is_upgraded_without_losing_its_summaries(self) -> None:
        world = base_world()
        old = JobState(view=world.view)
        current = {f"e:{k}": (e.descriptions.values(), e) for k, e in world.view.entities.items()}
        from graph.merge.aggregates import description_fingerprint

        slot, (descs, ent) = next(iter(current.items()))
        old.summaries = {slot: (description_fingerprint(ent), "old text"), "e:gone": ("x", "y")}  # type: ignore[dict-item]
        del old.__dict__["failures"]  # as a checkpoint from before failures were recorded
        state = upgrade_state(pickle.loads(pickle.dumps(old)))
        assert state.failures == {}
        assert state.summaries[slot] == SummaryRecord(
            description_fingerprint(ent), "old text", frozenset(descs), 0.0
        )
        assert state.summaries["e:gone"].basis == frozenset()  # unknown basis: due again


class TestJobProcess:
    async def test_a_dead_child_fails_one_run_and_the_next_call_gets_a_new_pool(
        self, tmp_path: Path
    ) -> None:
        job = CommunityJob(settings_for(tmp_path))
        try:
            with pytest.raises(RunFailed, match="child process died"):
                await job._in_pool(os._exit, 3)
            assert job.status.pool_restarts == 1
            assert await job._in_pool(abs, -4) == 4
        finally:
            job._pool.shutdown(cancel_futures=True)

    async def test_an_error_raised_in_the_child_arrives_whole(self, tmp_path: Path) -> None:
        job = CommunityJob(settings_for(tmp_path))
        try:
            with pytest.raises(RunFailed, match="LLMError: boom") as info:
                await job._in_pool(_raise_llm_error, "boom")
            assert isinstance(info.value.__cause__, LLMError)
            assert info.value.__cause__.retryable is False
            assert job.status.pool_restarts == 0
        finally:
            job._pool.shutdown(cancel_futures=True)


def _raise_llm_error(reason: str) -> None:
    raise LLMError(reason, retryable=False)


def test_a_new_leader_keeps_the_last_run_of_the_one_before(tmp_path: Path) -> None:
    from core.job_status import JobStatus, LastRun, write_status

    settings = settings_for(tmp_path)
    last = LastRun(7, 1000.0, 2.5, 40, 3, 2, 1, 0, {"community_report": 2})
    write_status(settings, JobStatus("running", 1, 900.0, 1000.0, runs=4, last_run=last))
    job = CommunityJob(settings)
    try:
        assert job._carried_over()["last_run"] == last
    finally:
        job._pool.shutdown(cancel_futures=True)


async def test_the_status_keeps_its_heartbeat_during_a_long_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import agents.community.job as job_module
    from core.job_status import read_status

    monkeypatch.setattr(job_module, "HEARTBEAT_S", 0.05)
    job = CommunityJob(settings_for(tmp_path))
    try:
        job._set_status(state="running")
        first = read_status(job.settings)
        async with job._heartbeats():
            await asyncio.sleep(0.3)  # a run in the child process
        later = read_status(job.settings)
        assert first is not None and later is not None
        assert later.updated_at > first.updated_at and later.state == "running"
    finally:
        job._pool.shutdown(cancel_futures=True)
