"""The scripted OpenAI-compatible server: strict about requests, answers derived from them,
faults on demand. Talked to over real loopback HTTP."""

from __future__ import annotations

import base64
import json
import re
import struct
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from pydantic import ValidationError

import prompts as p
from graph.model import Community
from graph.reports.context import (
    ChildReport,
    ReportClaim,
    ReportContext,
    ReportEntity,
    ReportGraph,
    ReportRelationship,
)
from graph.reports.context_builder import ReportContextBuilder
from kgrag.testing.scripted_answers import KINDS, answer, classify
from kgrag.testing.scripted_llm import FaultConfig, ScriptedLLMServer
from kgrag.testing.scripted_text import RequestRejected

LIB = p.PromptLibrary()
TYPES = ["organization", "person", "geo", "event"]
CHUNK = (
    "Harborview Shipping Ltd agreed to buy Coastal Freight Co for 210 million dollars. "
    "Chief executive Maria Lindqvist announced the deal in Rotterdam. "
    "The European Commission must approve it. "
    "Paulo Andrade attended the Trade Summit in Montevideo."
)
CONTEXT = (
    "-----Entities-----\nid|entity|description\n"
    "5|ACME CORP|Acme Corp makes anvils in Ohio\n6|WIDGET INC|Widget Inc makes widgets\n"
    "-----Relationships-----\nid|source|target|description\n"
    "31|ACME CORP|WIDGET INC|Acme Corp sued Widget Inc over anvil patents\n"
    "-----Sources-----\nid|text\n"
    "77|Acme Corp filed a lawsuit against Widget Inc on Monday over anvil patents.\n"
)


@pytest.fixture(scope="module")
def server() -> Iterator[ScriptedLLMServer]:
    with ScriptedLLMServer() as srv:
        yield srv


@pytest.fixture(autouse=True)
def _clean(server: ScriptedLLMServer) -> Iterator[None]:
    server.set_faults(FaultConfig())
    server.clear_calls()
    yield


def post_chat(
    srv: ScriptedLLMServer, messages: list[dict[str, str]], *, json_mode: bool = False
) -> httpx.Response:
    body: dict[str, object] = {"model": "m", "messages": messages}
    if json_mode:
        body["response_format"] = {"type": "json_object"}
    return httpx.post(f"{srv.base_url}/chat/completions", json=body, timeout=10)


def text_of(resp: httpx.Response) -> str:
    assert resp.status_code == 200, resp.text
    return str(resp.json()["choices"][0]["message"]["content"])


def extraction(chunk: str = CHUNK) -> list[dict[str, str]]:
    return [
        {
            "role": "user",
            "content": p.render_extract_graph(LIB, entity_types=TYPES, input_text=chunk),
        }
    ]


def entity_names(output: str) -> list[str]:
    return re.findall(r'\("entity"<\|>([^<]+)<\|>', output)


class TestStrictExtraction:
    @pytest.mark.parametrize(
        ("breakage", "reason"),
        [
            (
                lambda t: t.replace(
                    "Entity types: organization, person, geo, event", "Entity types:"
                ),
                "entity types",
            ),
            (lambda t: t.replace("<|COMPLETE|>", "END"), "delimiters"),
            (
                lambda t: re.sub(
                    r"=== Examples ===.*?=== Real data ===", "=== Real data ===", t, flags=re.S
                ),
                "worked examples",
            ),
            (lambda t: t.replace(CHUNK, ""), "chunk text"),
        ],
        ids=["no-types", "no-delimiters", "no-examples", "no-text"],
    )
    def test_incomplete_prompt_is_refused(
        self, server: ScriptedLLMServer, breakage: Any, reason: str
    ) -> None:
        prompt = breakage(extraction()[0]["content"])
        resp = post_chat(server, [{"role": "user", "content": prompt}])
        assert resp.status_code == 400
        assert reason in resp.json()["error"]["message"]
        assert server.calls()[-1].status == 400

    def test_answer_is_derived_from_the_chunk(self, server: ScriptedLLMServer) -> None:
        out = text_of(post_chat(server, extraction()))
        names = entity_names(out)
        assert {"HARBORVIEW SHIPPING LTD", "MARIA LINDQVIST", "ROTTERDAM"} <= set(names)
        assert all(n.lower() in CHUNK.lower() for n in names)
        assert out.rstrip().endswith("<|COMPLETE|>")
        assert '("relationship"<|>HARBORVIEW SHIPPING LTD<|>COASTAL FREIGHT CO<|>' in out

    def test_other_text_other_entities(self, server: ScriptedLLMServer) -> None:
        out = text_of(post_chat(server, extraction("Toyota Motors opened a plant in Kentucky.")))
        assert "TOYOTA MOTORS" in entity_names(out)
        assert "HARBORVIEW SHIPPING LTD" not in out

    def test_usage_tokens_reported(self, server: ScriptedLLMServer) -> None:
        usage = post_chat(server, extraction()).json()["usage"]
        assert usage["prompt_tokens"] > 100
        assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]


class TestGleaning:
    def test_conversation_finds_the_held_back_entities(self, server: ScriptedLLMServer) -> None:
        convo = extraction()
        first = text_of(post_chat(server, convo))
        convo += [
            {"role": "assistant", "content": first},
            {"role": "user", "content": p.render_glean_loop(LIB)},
        ]
        assert text_of(post_chat(server, convo)) == "YES"
        convo[-1] = {"role": "user", "content": p.render_glean_continue(LIB)}
        more = text_of(post_chat(server, convo))
        assert entity_names(more) and not set(entity_names(more)) & set(entity_names(first))
        convo += [
            {"role": "assistant", "content": more},
            {"role": "user", "content": p.render_glean_loop(LIB)},
        ]
        assert text_of(post_chat(server, convo)) == "NO"
        assert [c.kind for c in server.calls()] == [
            "extract_graph",
            "glean_loop",
            "glean_continue",
            "glean_loop",
        ]

    @pytest.mark.parametrize("turn", [p.render_glean_continue, p.render_glean_loop])
    def test_turn_without_earlier_answer_is_refused(
        self, server: ScriptedLLMServer, turn: Any
    ) -> None:
        convo = [*extraction(), {"role": "user", "content": turn(LIB)}]
        resp = post_chat(server, convo)
        assert resp.status_code == 400
        assert "earlier answer" in resp.json()["error"]["message"]


class TestOtherKinds:
    def test_report_is_valid_json_citing_only_input_ids(self, server: ScriptedLLMServer) -> None:
        prompt = p.render_community_report(LIB, input_text=CONTEXT)
        out = text_of(post_chat(server, [{"role": "user", "content": prompt}]))
        report = p.CommunityReportResponse.model_validate_json(out)
        cited = set(re.findall(r"\d+", " ".join(re.findall(r"\[Data:[^\]]*\]", out))))
        assert cited and cited <= {"5", "6", "31", "77"}
        assert "ACME CORP" in report.title

    @pytest.mark.parametrize(
        ("question", "scored"),
        [("Who sued over anvil patents?", True), ("What did the weather do?", False)],
    )
    def test_map_scores_follow_overlap(
        self, server: ScriptedLLMServer, question: str, scored: bool
    ) -> None:
        reports = (
            "-----Reports-----\nid|title|content\n7|Anvils|Acme sued Widget over anvil patents"
        )
        msgs = [
            {"role": "system", "content": p.render_global_map_system(LIB, context_data=reports)},
            {"role": "user", "content": question},
        ]
        points = p.MapResponse.model_validate_json(
            text_of(post_chat(server, msgs, json_mode=True))
        ).points
        assert (max(pt.score for pt in points) > 0) is scored
        if scored:
            assert "[Data: Reports (7)]" in points[0].description

    def test_local_answer_cites_context_ids(self, server: ScriptedLLMServer) -> None:
        msgs = [
            {"role": "system", "content": p.render_local_search_system(LIB, context_data=CONTEXT)},
            {"role": "user", "content": "Who was sued over anvil patents?"},
        ]
        out = text_of(post_chat(server, msgs))
        assert "Relationships (31)" in out and "Sources (77)" in out

    def test_summary_keeps_every_distinct_fact(self, server: ScriptedLLMServer) -> None:
        prompt = p.render_summarize_descriptions(
            LIB,
            entity_name="ACME CORP",
            descriptions=["Acme makes anvils.", "Acme makes anvils. Acme is based in Ohio."],
        )
        out = text_of(post_chat(server, [{"role": "user", "content": prompt}]))
        assert out.count("Acme makes anvils.") == 1 and "Ohio" in out

    def test_claims_follow_the_tuple_format(self, server: ScriptedLLMServer) -> None:
        prompt = p.render_extract_claims(
            LIB, entity_specs="organization", claim_description="deals", input_text=CHUNK
        )
        out = text_of(post_chat(server, [{"role": "user", "content": prompt}]))
        first = out.split("##")[0].strip().strip("()")
        assert len(first.split("<|>")) == 8 and first.startswith("HARBORVIEW SHIPPING LTD")

    def test_question_generation_gives_the_asked_count(self, server: ScriptedLLMServer) -> None:
        prompt = p.render_question_generation(LIB, context_data=CONTEXT, question_count=4)
        out = text_of(post_chat(server, [{"role": "user", "content": prompt}]))
        assert len([ln for ln in out.splitlines() if ln.startswith("- ")]) == 4

    def test_rating_is_json_in_range(self, server: ScriptedLLMServer) -> None:
        prompt = p.render_community_rating(
            LIB, question="anvil patents", report_text="Acme sued Widget over anvil patents"
        )
        rating = p.RatingResponse.model_validate_json(
            text_of(post_chat(server, [{"role": "user", "content": prompt}], json_mode=True))
        )
        assert rating.rating > 0


# ---- community reports: leaf, mixed and reports-only parent contexts ------------------------

BIG = [f"big{i}" for i in range(6)]
SMALL = [f"small{i}" for i in range(3)]
FAMILY_EDGES = [
    *((a, b) for i, a in enumerate(BIG) for b in BIG[i + 1 :]),
    *((a, b) for i, a in enumerate(SMALL) for b in SMALL[i + 1 :]),
    ("big0", "small0"),  # the one edge between the two sub-communities
]
# Child reports cite records of their own contexts (ids the parent's context does not show)
# and hold commas and quotes, so their rows are quoted CSV.
CHILD_REPORTS = {
    "c-big": ChildReport(
        "c-big",
        41,
        'The "Big Six" cartel',
        'The "Big Six" cartel: six firms, led by BIG0, fix prices '
        "[Data: Entities (0, 1, 2, 3, 4, +more); Relationships (100, 101)].",
    ),
    "c-small": ChildReport(
        "c-small",
        42,
        "Small trio of lenders",
        "Small trio of lenders: three banks lend to the cartel [Data: Relationships (115)].",
    ),
}


def _count_tokens(text: str) -> int:
    return len(re.findall(r"\w+|[^\w\s]", text))


def family_contexts() -> list[ReportContext]:
    """The parent community's contexts from the largest budget down: elements only, then
    one child's report in place of its elements, then both reports and the edge between."""
    degree: dict[str, int] = {}
    for a, b in FAMILY_EDGES:
        degree[a], degree[b] = degree.get(a, 0) + 1, degree.get(b, 0) + 1
    keys = sorted(degree)
    entities = [
        ReportEntity(
            k, i, k.upper(), "organization", f"{k.upper()} fixes prices, with others", degree[k]
        )
        for i, k in enumerate(keys)
    ]
    rels = [
        ReportRelationship(
            f"{a}|{b}",
            100 + i,
            a,
            b,
            f"{a.upper()} works with {b.upper()}",
            1.0,
            degree[a] + degree[b],
        )
        for i, (a, b) in enumerate(FAMILY_EDGES)
    ]
    builder = ReportContextBuilder(ReportGraph.build(entities, rels), _count_tokens)
    children = {
        "c-big": Community("c-big", 1, "c-p", (), frozenset(BIG)),
        "c-small": Community("c-small", 1, "c-p", (), frozenset(SMALL)),
    }
    parent = Community("c-p", 0, None, ("c-big", "c-small"), frozenset(BIG + SMALL))
    out: dict[tuple[int, int], ReportContext] = {}
    for budget in range(1000, 10, -5):
        ctx = builder.build(
            parent, max_tokens=budget, sub_communities=children, child_reports=CHILD_REPORTS
        )
        if ctx.child_reports or ctx.entities:  # below that, nothing of the community fits
            out.setdefault((len(ctx.child_reports), len(ctx.entities)), ctx)
    return list(out.values())


def reports_only_context() -> ReportContext:
    ctx = next(c for c in family_contexts() if len(c.child_reports) == 2 and not c.entities)
    assert ctx.relationships and not ctx.truncated
    return ctx


def cited_ids(text: str) -> dict[str, set[str]]:
    """Ids cited per table in every ``[Data: ...]`` of ``text`` (``+more`` is not an id)."""
    cited: dict[str, set[str]] = {}
    for block in re.findall(r"\[Data:([^\]]*)\]", text):
        for part in block.split(";"):
            m = re.fullmatch(r"\s*(\w+) \(([^)]*)\)\s*", part)
            assert m, f"malformed citation [Data:{block}]"
            ids = {i.strip() for i in m.group(2).split(",")} - {"+more"}
            cited.setdefault(m.group(1), set()).update(ids)
    return cited


def input_ids(ctx: ReportContext) -> dict[str, set[str]]:
    return {
        "Reports": {str(r.human_readable_id) for r in ctx.child_reports},
        "Entities": {str(i) for i in ctx.entity_hrids},
        "Relationships": {str(i) for i in ctx.relationship_hrids},
        "Claims": {str(i) for i in ctx.claim_hrids},
    }


def report_for(server: ScriptedLLMServer, data: str) -> httpx.Response:
    prompt = p.render_community_report(LIB, input_text=data)
    return post_chat(server, [{"role": "user", "content": prompt}])


class TestCommunityReports:
    def test_reports_only_parent_context_is_answered(self, server: ScriptedLLMServer) -> None:
        ctx = reports_only_context()
        assert "-----Reports-----" in ctx.text and "-----Entities-----" not in ctx.text
        out = text_of(report_for(server, ctx.text))
        report = p.CommunityReportResponse.model_validate_json(out)
        cited = cited_ids(out)
        assert cited["Reports"] == {"41", "42"}
        assert cited["Relationships"] == {str(ctx.relationship_hrids[0])}
        assert "Entities" not in cited  # the parent's context shows no entity rows
        assert 'The "Big Six" cartel' in report.title
        assert {f.summary for f in report.findings} >= {
            'The "Big Six" cartel',
            "Small trio of lenders",
        }
        assert any("three banks lend" in f.explanation for f in report.findings)

    def test_every_family_context_cites_only_its_own_ids(self, server: ScriptedLLMServer) -> None:
        contexts = family_contexts()
        shapes = {(len(c.child_reports), bool(c.entities)) for c in contexts}
        assert {(0, True), (1, True), (2, False)} <= shapes
        for ctx in contexts:
            out = text_of(report_for(server, ctx.text))
            p.CommunityReportResponse.model_validate_json(out)
            given = input_ids(ctx)
            for table, ids in cited_ids(out).items():
                assert ids <= given[table], (table, ids - given[table], ctx.text)

    @pytest.mark.parametrize(
        ("breakage", "reason"),
        [
            (lambda t: t.replace("=== Real data ===\nData:\n", "=== Real data ===\n"), "Data:"),
            (lambda t: re.sub(r"(?m)^Data:\n", "", t), "Data:"),
            (
                lambda t: t.replace(CONTEXT, "Acme Corp makes anvils, and Widget Inc widgets."),
                "neither an entity nor a report table",
            ),
            (
                lambda t: t.replace(CONTEXT, CONTEXT.split("\n5|")[0]),
                "neither an entity nor a report table",
            ),
            (
                lambda t: t.replace(
                    CONTEXT,
                    "-----Relationships-----\nid|source|target|description\n31|A|B|A sued B\n",
                ),
                "neither an entity nor a report table",
            ),
            (
                lambda t: t.replace(
                    CONTEXT, "-----Reports-----\nid,title,content\nno id here,Anvils,Acme sued\n"
                ),
                "neither an entity nor a report table",
            ),
        ],
        ids=[
            "no-real-data-section",
            "no-data-label",
            "prose-only",
            "entity-header-without-rows",
            "relationships-only",
            "report-rows-without-ids",
        ],
    )
    def test_malformed_report_prompt_is_refused(
        self, server: ScriptedLLMServer, breakage: Any, reason: str
    ) -> None:
        prompt = breakage(p.render_community_report(LIB, input_text=CONTEXT))
        resp = post_chat(server, [{"role": "user", "content": prompt}])
        assert resp.status_code == 400, resp.text
        assert reason in resp.json()["error"]["message"]
        assert server.calls()[-1].status == 400


# ---- several small communities in one request ------------------------------------------------

PORTS = ["harborview", "coastal", "rotterdam"]
GRAIN = ["grainboard", "ashford"]


def leaf_contexts() -> dict[str, ReportContext]:
    """Contexts of two small leaf communities of one graph, built by the real builder; their
    ids do not overlap, and the worked example's ids (1, 2, 5, 6, 10, 12) are not among them."""
    names = {
        "harborview": ("HARBORVIEW SHIPPING LTD", "organization"),
        "coastal": ("COASTAL FREIGHT CO", "organization"),
        "rotterdam": ("ROTTERDAM", "geo"),
        "grainboard": ("NORTHERN GRAIN BOARD", "organization"),
        "ashford": ("PORT OF ASHFORD", "geo"),
    }
    edges = [*((a, b) for i, a in enumerate(PORTS) for b in PORTS[i + 1 :]), (GRAIN[0], GRAIN[1])]
    degree = {k: sum(k in e for e in edges) for k in names}
    entities = [
        ReportEntity(k, 200 + i, name, etype, f"{name}, in the shipping news", degree[k])
        for i, (k, (name, etype)) in enumerate(names.items())
    ]
    rels = [
        ReportRelationship(
            f"{a}|{b}",
            300 + i,
            a,
            b,
            f"{names[a][0]} deals with {names[b][0]}",
            1.0,
            degree[a] + degree[b],
        )
        for i, (a, b) in enumerate(edges)
    ]
    claims = [
        ReportClaim("cl1", 400, "harborview", "ACQUISITION", "TRUE", "Harborview buys Coastal")
    ]
    builder = ReportContextBuilder(ReportGraph.build(entities, rels, claims), _count_tokens)
    return {
        cid: builder.build(Community(cid, 1, None, (), frozenset(keys)), max_tokens=2000)
        for cid, keys in (("c-ports", PORTS), ("c-grain", GRAIN))
    }


def batch_contexts() -> list[tuple[str, ReportContext]]:
    """Two leaves and a parent shown only through its children's reports, in that order."""
    leaves = leaf_contexts()
    return [
        ("c-ports", leaves["c-ports"]),
        ("c-grain", leaves["c-grain"]),
        ("c-p", reports_only_context()),
    ]


def reports_prompt(contexts: list[tuple[str, str]]) -> str:
    return p.render_community_reports(LIB, contexts=contexts)


def batch_prompt() -> str:
    return reports_prompt([(cid, ctx.text) for cid, ctx in batch_contexts()])


def post_reports(srv: ScriptedLLMServer, prompt: str) -> httpx.Response:
    return post_chat(srv, [{"role": "user", "content": prompt}])


RELS_ONLY = "-----Relationships-----\nid,source,target,description\n31,A,B,A sued B\n"
ENTS = "-----Entities-----\nid,entity,description,degree\n5,ACME CORP,Acme makes anvils,1\n"


def _without_second_data_line(prompt: str) -> str:
    head, real = prompt.split("=== Real data ===")
    second = real.index("Community: c-grain")
    return head + "=== Real data ===" + real[:second] + real[second:].replace("Data:\n", "", 1)


class TestBatchedCommunityReports:
    def test_kind_is_known_and_classified(self) -> None:
        assert KINDS["community_reports"] == p.TASK_MARKERS["community_reports"]
        msgs = [{"role": "user", "content": batch_prompt()}]
        assert classify(msgs) == "community_reports"
        single = p.render_community_report(LIB, input_text=CONTEXT)
        assert classify([{"role": "user", "content": single}]) == "community_report"

    def test_one_report_per_community_in_order(self, server: ScriptedLLMServer) -> None:
        contexts = batch_contexts()
        assert [bool(ctx.entities) for _, ctx in contexts] == [True, True, False]
        assert contexts[0][1].claims  # the ports community carries a claim
        out = text_of(post_reports(server, batch_prompt()))
        batch = p.CommunityReportsResponse.model_validate_json(out)
        assert [r.community for r in batch.reports] == [cid for cid, _ in contexts]
        assert server.calls()[-1].kind == "community_reports"
        for (cid, ctx), report in zip(contexts, batch.reports, strict=True):
            cited = cited_ids(report.model_dump_json())
            given = input_ids(ctx)
            assert cited, cid
            for table, ids in cited.items():
                assert ids and ids <= given[table], (cid, table, ids - given[table])
            # exactly the report the single-community prompt gets for the same context
            single = json.loads(text_of(report_for(server, ctx.text)))
            assert report.model_dump(exclude={"community"}) == (
                p.CommunityReportResponse.model_validate(single).model_dump()
            )
        assert "Claims" in cited_ids(batch.reports[0].model_dump_json())
        assert "HARBORVIEW SHIPPING LTD" in batch.reports[0].title
        assert "NORTHERN GRAIN BOARD" in batch.reports[1].title
        assert cited_ids(batch.reports[2].model_dump_json())["Reports"] == {"41", "42"}

    def test_example_blocks_are_not_answered(self) -> None:
        prompt = reports_prompt([("c-only", ENTS)])
        assert "Community: 41" in prompt  # the worked example's blocks
        out = json.loads(answer("community_reports", [{"role": "user", "content": prompt}]))
        assert [r["community"] for r in out["reports"]] == ["c-only"]
        assert cited_ids(json.dumps(out)) == {"Entities": {"5"}}

    @pytest.mark.parametrize(
        ("make", "reason"),
        [
            (
                lambda: batch_prompt().replace("=== Real data ===\n", ""),
                "no === Real data === section",
            ),
            (
                lambda: re.sub(r"(?m)^Community: .*\n", "", batch_prompt()),
                "no Community: block",
            ),
            (
                lambda: (
                    batch_prompt().split("=== Real data ===")[0] + "=== Real data ===\n\nReports:"
                ),
                "no Community: block",
            ),
            (
                lambda: _without_second_data_line(batch_prompt()),
                "community c-grain of the reports prompt has no Data: line",
            ),
            (
                lambda: reports_prompt([("c1", ENTS), ("c2", ENTS), ("c1", CONTEXT)]),
                "gives community c1 twice",
            ),
            (
                lambda: reports_prompt([("c1", ENTS), ("", ENTS)]),
                "without an id",
            ),
            (
                lambda: reports_prompt([("c1", ENTS), ("c2", RELS_ONLY)]),
                "community c2 of the reports prompt has neither an entity nor a report table",
            ),
            (
                lambda: reports_prompt(
                    [("c1", "Acme makes anvils, and Widget widgets."), ("c2", ENTS)]
                ),
                "community c1 of the reports prompt has neither an entity nor a report table",
            ),
            (
                lambda: reports_prompt(
                    [("c1", "-----Reports-----\nid,title,content\nno id here,Anvils,Acme sued\n")]
                ),
                "community c1 of the reports prompt has neither an entity nor a report table",
            ),
            (
                lambda: reports_prompt([("c1", ENTS.split("\n5,")[0])]),
                "community c1 of the reports prompt has neither an entity nor a report table",
            ),
        ],
        ids=[
            "no-real-data-section",
            "no-community-line",
            "empty-real-data",
            "block-without-data-line",
            "duplicate-ids",
            "empty-id",
            "relationships-only-block",
            "prose-only-block",
            "report-rows-without-ids",
            "entity-header-without-rows",
        ],
    )
    def test_malformed_batch_prompt_is_refused(
        self, server: ScriptedLLMServer, make: Any, reason: str
    ) -> None:
        prompt = make()
        assert prompt.startswith(p.TASK_MARKERS["community_reports"])
        resp = post_reports(server, prompt)
        assert resp.status_code == 400, resp.text
        assert reason in resp.json()["error"]["message"]
        call = server.calls()[-1]
        assert (call.kind, call.status) == ("community_reports", 400)
        with pytest.raises(RequestRejected, match=re.escape(reason)):
            answer("community_reports", [{"role": "user", "content": prompt}])

    def test_malformed_and_truncated_batch_answers_fail_validation(
        self, server: ScriptedLLMServer
    ) -> None:
        server.set_faults({"malformed": 1.0, "kinds": ["community_reports"]})
        assert "<|COMPLETE|>" in text_of(post_chat(server, extraction()))  # other kinds spared
        bad = text_of(post_reports(server, batch_prompt()))
        with pytest.raises(ValidationError):
            p.CommunityReportsResponse.model_validate_json(bad)
        server.set_faults({"truncated": 1.0, "kinds": ["community_reports"]})
        cut = text_of(post_reports(server, batch_prompt()))
        with pytest.raises(ValidationError):
            p.CommunityReportsResponse.model_validate_json(cut)
        assert [c.fault for c in server.calls()] == [None, "malformed", "truncated"]


class TestFaultsAndScripts:
    def test_script_overrides_next_answer_of_a_kind(self, server: ScriptedLLMServer) -> None:
        httpx.post(
            f"{server.base_url[:-3]}/_script",
            json={"kind": "local_search", "text": "Made up [Data: Entities (999)]"},
        )
        msgs = [
            {"role": "system", "content": p.render_local_search_system(LIB, context_data=CONTEXT)},
            {"role": "user", "content": "anvils?"},
        ]
        assert "999" in text_of(post_chat(server, msgs))
        assert "999" not in text_of(post_chat(server, msgs))

    def test_rate_limit_carries_retry_after(self, server: ScriptedLLMServer) -> None:
        server.set_faults({"rate_limit": 1.0, "retry_after_s": 2.5})
        resp = post_chat(server, extraction())
        assert resp.status_code == 429
        assert resp.headers["retry-after"] == "3" and resp.headers["retry-after-ms"] == "2500"

    def test_malformed_and_truncated_output(self, server: ScriptedLLMServer) -> None:
        server.set_faults({"malformed": 1.0})
        assert "<|COMPLETE|>" not in text_of(post_chat(server, extraction()))
        server.set_faults({"truncated": 1.0})
        cut = text_of(post_chat(server, extraction()))
        assert "<|COMPLETE|>" not in cut and not cut.rstrip().endswith(")")
        assert [c.fault for c in server.calls()] == ["malformed", "truncated"]

    def test_faults_limited_to_kinds_and_count(self, server: ScriptedLLMServer) -> None:
        server.set_faults({"server_error": 1.0, "kinds": ["extract_graph"], "max_faults": 1})
        emb = httpx.post(f"{server.base_url}/embeddings", json={"input": "x", "model": "e"})
        assert emb.status_code == 200
        assert post_chat(server, extraction()).status_code == 500
        assert post_chat(server, extraction()).status_code == 200

    def test_fault_config_over_http_is_validated(self, server: ScriptedLLMServer) -> None:
        root = server.base_url[:-3]
        assert httpx.post(f"{root}/_faults", json={"rate_limt": 0.2}).status_code == 400
        assert httpx.post(f"{root}/_faults", json={"malformed": 2}).status_code == 400
        ok = httpx.post(f"{root}/_faults", json={"rate_limit": 0.2, "latency_s": 0.01})
        assert ok.json()["rate_limit"] == 0.2 and server.faults().latency_s == 0.01

    async def test_latency_does_not_serialise_requests(self, server: ScriptedLLMServer) -> None:
        import asyncio

        server.set_faults({"latency_s": 0.3})
        async with httpx.AsyncClient(timeout=10) as client:
            await asyncio.gather(
                *(
                    client.post(
                        f"{server.base_url}/chat/completions",
                        json={"model": "m", "messages": extraction()},
                    )
                    for _ in range(5)
                )
            )
        assert server.stats()["max_in_flight"] == 5


class TestCallLogAndEmbeddings:
    def test_calls_listed_and_cleared_over_http(self, server: ScriptedLLMServer) -> None:
        post_chat(server, extraction())
        root = server.base_url[:-3]
        calls = httpx.get(f"{root}/_calls").json()
        assert [c["kind"] for c in calls] == ["extract_graph"]
        assert CHUNK in calls[0]["messages"][0]["content"] and calls[0]["timestamp"] > 0
        httpx.delete(f"{root}/_calls")
        assert httpx.get(f"{root}/_calls").json() == []

    def test_embeddings_deterministic_with_requested_dimension(
        self, server: ScriptedLLMServer
    ) -> None:
        def embed(**extra: Any) -> dict[str, Any]:
            body = {
                "model": "e",
                "input": ["oil prices rise", "oil prices rise", "anvils"],
                **extra,
            }
            return httpx.post(f"{server.base_url}/embeddings", json=body).json()

        data = embed(dimensions=64)["data"]
        a, b, c = (d["embedding"] for d in data)
        assert len(a) == 64 and a == b and a != c
        assert abs(sum(x * x for x in a) - 1.0) < 1e-9
        packed = embed(dimensions=64, encoding_format="base64")["data"][0]["embedding"]
        decoded = struct.unpack("<64f", base64.b64decode(packed))
        assert max(abs(x - y) for x, y in zip(decoded, a, strict=True)) < 1e-6
        assert len(embed()["data"][0]["embedding"]) == 384


def test_runs_as_its_own_process() -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "kgrag.testing.scripted_llm", "--port", "0", "--latency-ms", "5"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        url = re.search(r"http://\S+/v1", line)
        assert url, line
        resp = httpx.post(
            f"{url.group(0)}/chat/completions",
            json={"model": "m", "messages": extraction()},
            timeout=10,
        )
        assert "<|COMPLETE|>" in text_of(resp)
        assert json.loads(httpx.get(url.group(0)[:-3] + "/_faults").text)["latency_s"] == 0.005
    finally:
        proc.terminate()
        proc.wait(10)
        if proc.stdout is not None:
            proc.stdout.close()


class TestStrictQueryPrompts:
    """Query prompts are held to their form, so an LLM-mode query test can fail."""

    def local(self, data: str = "-----Entities-----\nid|entity\n1|ACME") -> str:
        return p.render_local_search_system(LIB, context_data=data)

    def test_a_prompt_without_a_task_line_is_refused(self) -> None:
        system = self.local().split("\n", 1)[1]  # the TASK: line dropped
        msgs = [{"role": "system", "content": system}, {"role": "user", "content": "ACME?"}]
        assert classify(msgs) == "unknown"
        with pytest.raises(RequestRejected, match="no TASK: line"):
            answer("unknown", msgs)

    @pytest.mark.parametrize(
        ("kind", "system", "said"),
        [
            ("local_search", "=== Data tables ===", "no === Data tables === section"),
            ("local_search", "[Data:", "citations"),
            ("global_reduce", "=== Analyst reports ===", "no === Analyst reports ==="),
        ],
    )
    def test_a_query_prompt_without_its_parts_is_refused(
        self, kind: str, system: str, said: str
    ) -> None:
        prompt = (
            self.local()
            if kind == "local_search"
            else p.render_global_reduce_system(LIB, report_data="A [Data: Reports (1)]")
        )
        broken = prompt.replace(system, "")
        msgs = [{"role": "system", "content": broken}, {"role": "user", "content": "ACME?"}]
        with pytest.raises(RequestRejected, match=re.escape(said)):
            answer(kind, msgs)

    def test_a_map_prompt_must_be_sent_in_json_mode(self, server: ScriptedLLMServer) -> None:
        system = p.render_global_map_system(LIB, context_data="-----Reports-----\nid|title\n7|Acme")
        msgs = [{"role": "system", "content": system}, {"role": "user", "content": "Acme?"}]
        refused = post_chat(server, msgs)
        assert refused.status_code == 400 and "JSON mode" in refused.text
        assert post_chat(server, msgs, json_mode=True).status_code == 200
