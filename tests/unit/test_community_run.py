"""One community-job run, in process and offline: what a user of the snapshots and events sees.

The graph is built the way the stream builds it: hand-made extractions go through
``chunk_contributions`` and the merge rules (``absorb_*``), and the resulting ``GraphChange``
rows are folded into the job's ``GraphView``. Each storyline is a few dense groups of named
entities with a couple of bridges between the groups, storylines share no entity, and the
``Runner`` runs with the offline writers, no vectors and a temporary data directory.
"""

from __future__ import annotations

import itertools
import pickle
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pytest

import graph.reports.evidence as evidence_module
from agents.community.result import RunResult
from agents.community.runner import Runner
from core.settings import Settings, load_settings
from core.settings.community import CommunitySettings
from core.settings.llm import LLMSettings
from core.tables.opening import open_graph_store
from graph.job.run import evidence_index, report_graph
from graph.job.state import JobState
from graph.keys import entity_key
from graph.merge.local import LocalMerger
from graph.merge.view import GraphView
from graph.model import Chunk, ChunkExtraction, Community, EntityMention, RelationshipMention
from graph.versions.model import Snapshot

MAX_DESCRIPTIONS = 12

# ---- builder: extractions → merge rules → graph-changes → the job's view ----------------------


@dataclass
class World(LocalMerger):
    """The merger's rules in memory (``graph.merge.local``), one chunk per document."""

    chunks: int = 0

    def say(
        self,
        doc_id: str,
        facts: list[tuple[str, str]],
        edges: Sequence[tuple[str, str, str]] = (),
        day: str = "1987-03-02",
    ) -> None:
        """One document of one chunk naming ``facts`` (name, description) and ``edges``."""
        self.chunks += 1
        text = " ".join(d for _, d in facts) + " " + " ".join(d for *_, d in edges)
        chunk = Chunk(
            f"chunk-{self.chunks}", doc_id, doc_id, f"{day}T09:00:00Z", 0, text, len(text) // 4
        )
        extraction = ChunkExtraction(
            chunk,
            tuple(EntityMention(n, "organization", d, chunk.id) for n, d in facts),
            tuple(RelationshipMention(a, b, d, 5.0, chunk.id) for a, b, d in edges),
        )
        self.view.apply({"id": doc_id, "title": doc_id, "text": text, "published_at": day})
        self.absorb(extraction)

    def group(self, name: str) -> list[str]:
        """Eight members in two desks of four; everyone in a desk is related, and each member
        to one member of the other desk. One document per desk and one for the links."""
        members = [f"{name} {i}" for i in range(8)]
        for desk in (members[:4], members[4:]):
            self.say(
                f"doc-{desk[0]}",
                [(m, f"{m} works at the {name} desk.") for m in desk],
                [(a, b, f"{a} trades with {b}.") for a, b in itertools.combinations(desk, 2)],
            )
        self.say(
            f"doc-{name}-links",
            [],
            [(a, b, f"{a} reports to {b}.") for a, b in zip(members[:4], members[4:], strict=True)],
        )
        return members

    def storyline(self, name: str, groups: int) -> list[list[str]]:
        """``groups`` groups chained by one bridge each: one storyline of the news."""
        out = [self.group(f"{name} {chr(65 + g)}") for g in range(groups)]
        for g, (left, right) in enumerate(itertools.pairwise(out)):
            self.say(f"doc-{name}-bridge-{g}", [], [(left[0], right[0], "They merged desks.")])
        return out


def base_world() -> World:
    world = World()
    world.storyline("Orion", groups=3)
    world.storyline("Vega", groups=2)
    world.group("Lyra")
    return world


# ---- running the job in process -------------------------------------------------------------


def make_settings(tmp: Path, **community: Any) -> Settings:
    base = load_settings()
    return base.model_copy(
        update={
            "namespace": "unit",
            "data_dir": tmp,
            "llm": LLMSettings(base_url=None),
            "community": CommunitySettings(**community),
        }
    )


@dataclass
class Job:
    settings: Settings
    state: JobState = field(default_factory=JobState)
    last: RunResult | None = None

    async def run(self, view: GraphView) -> RunResult:
        self.state.view = view
        self.last = await Runner(self.settings, self.state, write_vectors=False).run()
        return self.last

    def snapshot(self) -> Snapshot:
        return open_graph_store(self.settings).load()

    def regenerated(self) -> set[str]:
        snap = self.snapshot()
        return {r.id for r in snap.community_reports if r.generated_in == snap.meta.version}

    def kinds(self) -> list[str]:
        assert self.last is not None, "no run yet"
        return sorted(e["kind"] for e in self.last.events)


def holding(communities: tuple[Community, ...], key: str) -> set[str]:
    """Ids of the communities (every level) whose members include ``key``."""
    return {c.id for c in communities if key in c.entity_keys}


def settings_for(tmp: Path, **community: Any) -> Settings:
    """Leaves of at most five, so each group of eight is split into its two desks."""
    return make_settings(tmp, **{"max_cluster_size": 5, **community})


async def steady_job(tmp: Path, **community: Any) -> tuple[World, Job]:
    """The base world after two runs on the same graph."""
    world, job = base_world(), Job(settings_for(tmp, **community))
    await job.run(world.view)
    await job.run(world.view)
    return world, job


def ancestors(communities: tuple[Community, ...], cid: str) -> set[str]:
    by_id = {c.id: c for c in communities}
    out: set[str] = set()
    parent = by_id[cid].parent
    while parent is not None:
        out.add(parent)
        parent = by_id[parent].parent
    return out


def leaf_of(communities: tuple[Community, ...], key: str) -> Community:
    return max((c for c in communities if key in c.entity_keys), key=lambda c: c.level)


# ---- first runs and the steady state -----------------------------------------------------------


class TestFirstRuns:
    async def test_first_run_announces_one_bootstrap_and_writes_every_report(
        self, tmp_path: Path
    ) -> None:
        world, job = base_world(), Job(settings_for(tmp_path))
        result = await job.run(world.view)
        assert [e["kind"] for e in result.events] == ["bootstrap"]
        assert result.events[0]["size"] == len(world.view.entities)
        snap = job.snapshot()
        assert {r.id for r in snap.community_reports} == {c.id for c in snap.communities}
        assert result.regenerated == len(snap.communities) == 18  # 6 groups, 12 desks
        assert {c.level for c in snap.communities} == {0, 1}
        if sys.platform.startswith("linux"):  # each timed phase with the process's peak then
            assert result.phase_peak_mib.keys() == {
                k for k in result.timings if not k.startswith("snapshot_")
            }
            assert min(result.phase_peak_mib.values()) > 10

    async def test_second_run_on_the_same_graph_changes_nothing(self, tmp_path: Path) -> None:
        world, job = base_world(), Job(settings_for(tmp_path))
        await job.run(world.view)
        first = job.snapshot()
        result = await job.run(world.view)
        assert result.regenerated == 0 and result.events == []
        second = job.snapshot()
        assert second.meta.version == first.meta.version + 1
        assert second.community_reports == first.community_reports
        assert [c.entity_ids for c in second.communities] == [
            c.entity_ids for c in first.communities
        ]


# ---- what a change regenerates -----------------------------------------------------------------


class TestRegeneration:
    async def test_new_separate_cluster_emerges_alone_and_regenerates_no_other_report(
        self, tmp_path: Path
    ) -> None:
        world, job = await steady_job(tmp_path)
        before = {c.id for c in job.state.communities}
        reports_before = {r.id: r for r in job.snapshot().community_reports}
        members = [f"Draco {i}" for i in range(4)]
        world.say(
            "doc-draco",
            [(m, f"{m} joined the new Draco consortium.") for m in members],
            [
                (a, b, f"{a} co-founded Draco with {b}.")
                for a, b in itertools.combinations(members, 2)
            ],
        )
        result = await job.run(world.view)
        kinds = [e["kind"] for e in result.events]
        assert kinds == ["emerged"], result.events
        new = {c.id for c in job.state.communities} - before
        assert len(new) == 1 and result.events[0]["community_id"] in new
        assert set(result.events[0]["top_entities"]) == set(members)
        assert job.regenerated() == new
        after = {r.id: r for r in job.snapshot().community_reports}
        assert {k: after[k] for k in reports_before} == reports_before

    @pytest.mark.parametrize(
        ("budget", "name", "parent_regenerated"),
        [(8000, "Orion B 1", False), (400, "Orion B 1", True), (400, "Orion B 5", False)],
        ids=["parent-context-fits", "parent-used-that-report", "parent-used-another-report"],
    )
    async def test_new_fact_regenerates_its_community_and_ancestors_only_when_due(
        self, tmp_path: Path, budget: int, name: str, parent_regenerated: bool
    ) -> None:
        """At 400 tokens a group's context holds the report of its desk 0-3 in place of that
        desk's rows (the larger child first, ties by id) and desk 4-7's rows themselves."""
        threshold = 0.05  # one new fact is ~9% of a desk's evidence and ~4% of its group's
        world, job = await steady_job(
            tmp_path, materiality_threshold=threshold, report_max_tokens=budget
        )
        communities = job.state.communities
        leaf = leaf_of(communities, entity_key(name))
        parents = ancestors(communities, leaf.id)
        assert parents, "the desk sits under its group"
        bases = dict(job.state.bases)
        world.say("doc-fact", [(name, f"{name} was fined by the regulator.")])
        result = await job.run(world.view)
        regenerated = job.regenerated()
        assert leaf.id in regenerated
        assert regenerated <= {leaf.id} | parents
        assert (regenerated >= parents) is parent_regenerated
        reasons = {e["community_id"]: e["reason"] for e in result.events}
        assert reasons[leaf.id] == "new_evidence"
        for pid in parents & regenerated:
            # only because its context used the regenerated child's report
            assert reasons[pid] == "child_report_regenerated"
            assert leaf.id in bases[pid].used_child_reports
        assert {e["kind"] for e in result.events} == {"report_updated"}
        report = next(r for r in job.snapshot().community_reports if r.id == leaf.id)
        assert report.unreflected == 0.0

    async def test_repeated_fact_regenerates_nothing(self, tmp_path: Path) -> None:
        world, job = await steady_job(tmp_path, materiality_threshold=0.05)
        reports = job.snapshot().community_reports
        known = world.view.entities["orion b 5"].descriptions.values()[0]
        world.say("doc-again", [("Orion B 5", known)], day="1987-03-09")
        assert world.view.entities["orion b 5"].mention_count == 2
        result = await job.run(world.view)
        assert result.regenerated == 0 and result.events == []
        assert job.snapshot().community_reports == reports

    async def test_evidence_below_the_threshold_is_recorded_per_report(
        self, tmp_path: Path
    ) -> None:
        world, job = await steady_job(tmp_path)  # default threshold 0.2
        threshold = job.settings.community.materiality_threshold
        communities = job.state.communities
        leaf = leaf_of(communities, "vega a 2")
        world.say("doc-small", [("Vega A 2", "Vega A 2 opened a branch in Lisbon.")])
        result = await job.run(world.view)
        assert result.regenerated == 0
        snap = job.snapshot()
        unreflected = {r.id: r.unreflected for r in snap.community_reports}
        touched = {leaf.id} | ancestors(communities, leaf.id)
        assert all(0 < unreflected[c] <= threshold for c in touched), unreflected
        assert all(v == 0.0 for c, v in unreflected.items() if c not in touched)
        assert snap.meta.unreflected_max == max(unreflected.values())

    @pytest.mark.parametrize("remembered", [False, True], ids=["counted", "carried-in-place"])
    async def test_nothing_stays_above_the_threshold_after_a_run(
        self, tmp_path: Path, remembered: bool, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Also when every community's evidence is remembered and carried over in place: a
        report's basis is what it was written from, not the live set that moves on."""
        if remembered:
            monkeypatch.setattr(evidence_module, "MEMO_MIN_MEMBERS", 1)
        world, job = await steady_job(tmp_path)
        threshold = job.settings.community.materiality_threshold
        for i in range(6):  # one small fact at a time: each run may leave some unreflected
            world.say(f"doc-drip-{i}", [("Vega A 2", f"Vega A 2 opened branch number {i}.")])
            await job.run(world.view)
            snap = job.snapshot()
            assert all(r.unreflected <= threshold for r in snap.community_reports)
            assert snap.meta.unreflected_max <= threshold
        leaf = leaf_of(job.state.communities, "vega a 2")
        assert any(  # the drip did pass the threshold at some point and was written up
            r.id == leaf.id and r.generated_in > 2 for r in snap.community_reports
        )


# ---- ids, snapshots, checkpoints ---------------------------------------------------------------


class TestStability:
    async def test_ids_survive_a_small_change(self, tmp_path: Path) -> None:
        world, job = await steady_job(tmp_path)
        before = {c.id: c.entity_keys for c in job.state.communities}
        world.say(
            "doc-hire",
            [("Orion A 8", "Orion A 8 was hired by Orion A.")],
            [
                ("Orion A 8", "Orion A 0", "Orion A 8 reports to Orion A 0."),
                ("Orion A 8", "Orion A 1", "Orion A 8 trades with Orion A 1."),
            ],
        )
        await job.run(world.view)
        after = {c.id: c.entity_keys for c in job.state.communities}
        assert set(after) == set(before)
        changed = {cid for cid in after if after[cid] != before[cid]}
        assert changed == holding(job.state.communities, "orion a 8")
        assert all(after[c] - before[c] == {"orion a 8"} for c in changed)

    async def test_snapshot_tables_reference_only_records_that_exist(self, tmp_path: Path) -> None:
        world, job = await steady_job(tmp_path)
        world.say(
            "doc-hire",
            [("Lyra 8", "Lyra 8 joined Lyra.")],
            [("Lyra 8", "Lyra 0", "Lyra 8 reports to Lyra 0.")],
        )
        await job.run(world.view)
        snap = job.snapshot()
        entities = {e.id for e in snap.entities}
        relationships = {r.id for r in snap.relationships}
        units = {u.id for u in snap.text_units}
        communities = {c.id for c in snap.communities}
        numbers = {c.community: c for c in snap.communities}
        assert len(numbers) == len(snap.communities)
        for c in snap.communities:
            assert c.entity_ids and set(c.entity_ids) <= entities
            assert set(c.relationship_ids) <= relationships
            assert set(c.text_unit_ids) <= units
            assert c.parent == -1 or numbers[c.parent].level == c.level - 1
            assert all(numbers[ch].parent == c.community for ch in c.children)
        for r in snap.community_reports:
            assert r.id in communities and numbers[r.community].id == r.id
        for e in snap.entities:
            assert e.text_unit_ids and set(e.text_unit_ids) <= units
        for rel in snap.relationships:
            assert {entity_key(rel.source), entity_key(rel.target)} <= entities
            assert set(rel.text_unit_ids) <= units
        for u in snap.text_units:
            assert set(u.entity_ids) <= entities and set(u.relationship_ids) <= relationships
        documents = {d.id for d in snap.documents}
        assert {u.document_id for u in snap.text_units} <= documents
        hrids = [e.human_readable_id for e in snap.entities]
        assert len(set(hrids)) == len(hrids)

    async def test_checkpointed_state_reloaded_regenerates_nothing(self, tmp_path: Path) -> None:
        world, job = await steady_job(tmp_path)
        world.say(
            "doc-hire",
            [("Vega B 8", "Vega B 8 joined Vega B.")],
            [("Vega B 8", "Vega B 3", "Vega B 8 reports to Vega B 3.")],
        )
        await job.run(world.view)
        reports = job.snapshot().community_reports
        restored = Job(job.settings, pickle.loads(pickle.dumps(job.state)))
        result = await restored.run(restored.state.view)
        assert result.regenerated == 0 and result.events == []
        snap = restored.snapshot()
        assert snap.meta.version == job.state.version + 1
        assert snap.community_reports == reports


# ---- a run visits what changed -------------------------------------------------------------------


def _fact(world: World, step: int) -> None:
    """One change per step, of the kinds news brings: a fact, a newcomer, a repeat, a cluster."""
    kind = step % 4
    if kind == 0:
        world.say(f"doc-fact-{step}", [("Vega A 2", f"Vega A 2 opened branch number {step}.")])
    elif kind == 1:
        name = f"Orion B {8 + step}"
        world.say(
            f"doc-new-{step}",
            [(name, f"{name} joined Orion B.")],
            [(name, "Orion B 1", f"{name} reports to Orion B 1.")],
        )
    elif kind == 2:
        known = world.view.entities["lyra 3"].descriptions.values()[0]
        world.say(f"doc-repeat-{step}", [("Lyra 3", known)])
    else:
        world.group(f"Draco {step}")


class TestPlanningScope:
    async def test_a_new_fact_plans_its_community_and_ancestors_alone(self, tmp_path: Path) -> None:
        world, job = await steady_job(tmp_path)
        communities = job.state.communities
        leaf = leaf_of(communities, "vega a 2")
        world.say("doc-small", [("Vega A 2", "Vega A 2 opened a branch in Lisbon.")])
        result = await job.run(world.view)
        assert result.planned == 1 + len(ancestors(communities, leaf.id)) < len(communities)

    async def test_planning_what_changed_decides_as_planning_everything(
        self, tmp_path: Path
    ) -> None:
        """The same changes into two jobs, one told nothing of what they touched (it plans
        every community, as before): same reports, same unreflected shares, same events."""
        worlds = [base_world(), base_world()]
        jobs = [Job(settings_for(tmp_path / "scoped")), Job(settings_for(tmp_path / "all"))]
        for step in range(9):
            if step:
                for world in worlds:
                    _fact(world, step)
            worlds[1].view.touched = None
            results = [await job.run(world.view) for job, world in zip(jobs, worlds, strict=True)]
            kept, rebuilt = jobs[0].state.evidence, evidence_index(worlds[0].view, JobState(), None)
            assert kept is not None and kept.entity_facts == rebuilt.entity_facts, step
            assert kept.edge_facts == rebuilt.edge_facts, step
            keys = set(sorted(worlds[0].view.entities)[::3])
            via_index = report_graph(worlds[0].view, jobs[0].state, keys)
            jobs[0].state.evidence = None  # every relationship of the view read instead
            assert report_graph(worlds[0].view, jobs[0].state, keys) == via_index, step
            jobs[0].state.evidence = kept
            assert results[0].events == results[1].events, step
            assert results[0].regenerated == results[1].regenerated, step
            snaps = [job.snapshot() for job in jobs]
            assert snaps[0].community_reports == snaps[1].community_reports, step
            assert snaps[0].meta.unreflected_max == snaps[1].meta.unreflected_max, step
        assert results[1].planned == results[1].communities
        assert results[0].planned < results[0].communities

    async def test_a_view_from_an_older_checkpoint_plans_every_community(
        self, tmp_path: Path
    ) -> None:
        from agents.community.state import upgrade_state

        world, job = await steady_job(tmp_path)
        del vars(job.state.view)["touched"]  # as unpickled from a checkpoint without it
        job.state = upgrade_state(job.state)
        world.say("doc-small", [("Vega A 2", "Vega A 2 opened a branch in Lisbon.")])
        result = await job.run(world.view)
        assert result.planned == result.communities
        world.say("doc-later", [("Vega A 2", "Vega A 2 closed a branch in Porto.")])
        assert (await job.run(world.view)).planned < result.communities


class TestDrift:
    async def test_every_nth_run_compares_with_a_fresh_clustering(self, tmp_path: Path) -> None:
        world, job = base_world(), Job(settings_for(tmp_path, drift_check_every=2))
        results = [await job.run(world.view) for _ in range(4)]
        checked = [r.drift for r in results]
        assert checked[0] is None and checked[2] is None  # versions 1 and 3
        for drift in (checked[1], checked[3]):
            assert drift is not None and drift.scratch > 0
            assert drift.gap <= job.settings.community.rebalance_gap
            assert not drift.rebalanced
        never = Job(settings_for(tmp_path / "never", drift_check_every=0))
        assert all([(await never.run(world.view)).drift is None for _ in range(3)])

    @pytest.mark.parametrize(("better", "taken"), [(-0.05, False), (0.05, True)])
    async def test_a_rebalance_is_taken_when_it_scores_higher_and_rewrites_what_moved(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, better: float, taken: bool
    ) -> None:
        """A fresh clustering that looks far better makes the run re-cluster with every node
        free; the result is taken only if it scores higher than the maintained one. On a
        graph whose communities are where they belong, either way nothing a reader would see
        changes."""
        import graph.job.run as community_run

        world, job = await steady_job(tmp_path, drift_check_every=1)
        reports = job.snapshot().community_reports
        monkeypatch.setattr(community_run, "scratch_modularity", lambda graph, seed: 0.99)
        whole, tried = community_run._whole_graph, []

        def scored(kept: Any, state: JobState, params: Any, rebalance: bool) -> Any:
            made = whole(kept, state, params, rebalance)
            if not rebalance:
                return made
            tried.append(made.modularity)
            return replace(made, modularity=made.modularity + better)

        monkeypatch.setattr(community_run, "_whole_graph", scored)
        result = await job.run(world.view)
        assert tried and result.drift is not None and result.drift.rebalanced is taken
        assert result.modularity == pytest.approx(
            tried[0] + better if taken else result.drift.maintained
        )
        assert result.regenerated == 0 and result.events == []
        assert job.snapshot().community_reports == reports
