"""Prompt files render completely, and a user's override directory takes precedence."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from pydantic import ValidationError

import prompts as p

DOC = "Acme Corp said on Monday it would buy Widget Inc. {input_text} stays literal here."

RENDERERS: dict[str, Callable[[p.PromptLibrary], str]] = {
    "extract_graph": lambda lib: p.render_extract_graph(
        lib, entity_types=["organization", "person"], input_text=DOC
    ),
    "glean_continue": p.render_glean_continue,
    "glean_loop": p.render_glean_loop,
    "extract_claims": lambda lib: p.render_extract_claims(
        lib, entity_specs="organization", claim_description="red flags", input_text=DOC
    ),
    "summarize_descriptions": lambda lib: p.render_summarize_descriptions(
        lib, entity_name="ACME CORP", descriptions=["A maker of anvils", "Buys Widget Inc"]
    ),
    "community_report": lambda lib: p.render_community_report(
        lib, input_text="Entities\nid,entity,description\n1,ACME CORP,x", max_report_length=900
    ),
    "community_reports": lambda lib: p.render_community_reports(
        lib,
        contexts=[("3", "Entities\nid,entity,description\n1,ACME CORP,x"), ("4", "Entities")],
    ),
    "local_search_system": lambda lib: p.render_local_search_system(
        lib, context_data="Entities\nid|entity\n1|ACME", response_type="one paragraph"
    ),
    "basic_search_system": lambda lib: p.render_basic_search_system(
        lib, context_data="Sources\nid|text\n4|Acme bought Widget"
    ),
    "global_map_system": lambda lib: p.render_global_map_system(
        lib, context_data="Reports\nid|title|content\n7|Acme|Acme buys"
    ),
    "global_reduce_system": lambda lib: p.render_global_reduce_system(
        lib, report_data="----Analyst 1----\nImportance Score: 80\nAcme [Data: Reports (7)]"
    ),
    "community_rating": lambda lib: p.render_community_rating(
        lib, question="Who bought Widget?", report_text="Acme buys Widget"
    ),
    "question_generation": lambda lib: p.render_question_generation(
        lib, context_data="Entities\nid|entity\n1|ACME", question_count=3
    ),
    "confirm_alias": lambda lib: p.render_confirm_alias(
        lib, alias="OTC", canonical="Orion Trade Council", evidence="x", passages=["OTC met."]
    ),
    "drift_primer": lambda lib: p.render_drift_primer(
        lib, community_reports="Reports\nid|title|content\n7|Acme|Acme buys", followups=3
    ),
    "drift_local_system": lambda lib: p.render_drift_local_system(
        lib, context_data="Entities\nid|entity\n1|ACME", global_query="Who?", followups=2
    ),
    "drift_reduce_system": lambda lib: p.render_drift_reduce_system(
        lib, intermediate_answers="----Answer 1----\nScore: 80\nAcme [Data: Reports (7)]"
    ),
}


class TestShippedTemplates:
    def test_every_prompt_has_a_renderer(self) -> None:
        assert set(RENDERERS) == set(p.PROMPT_NAMES)

    @pytest.mark.parametrize("name", sorted(RENDERERS))
    def test_renders_without_leftover_placeholders(self, name: str) -> None:
        text = RENDERERS[name](p.PromptLibrary())
        template_placeholders = p.placeholders(p.PromptLibrary().template(name))
        leftovers = p.placeholders(text.replace("{input_text} stays literal", ""))
        assert not leftovers & template_placeholders, leftovers

    @pytest.mark.parametrize("name", sorted(RENDERERS))
    def test_first_line_is_the_task_marker(self, name: str) -> None:
        assert RENDERERS[name](p.PromptLibrary()).splitlines()[0] == p.TASK_MARKERS[name]

    def test_extraction_carries_types_delimiters_examples_and_text(self) -> None:
        text = RENDERERS["extract_graph"](p.PromptLibrary())
        real = text.split("=== Real data ===")[1]
        assert "Entity types: organization, person" in real
        assert DOC in real
        for delim in ("<|>", "##", "<|COMPLETE|>"):
            assert delim in text
        assert text.count("--- Example") >= 3

    def test_document_text_is_not_substituted_twice(self) -> None:
        # A document quoting "{input_text}" must reach the model verbatim.
        assert "{input_text} stays literal" in RENDERERS["extract_graph"](p.PromptLibrary())

    def test_summary_lists_each_description(self) -> None:
        text = RENDERERS["summarize_descriptions"](p.PromptLibrary())
        assert "- A maker of anvils\n- Buys Widget Inc" in text


class TestOverrides:
    def test_override_file_replaces_shipped_prompt(self, tmp_path: Path) -> None:
        (tmp_path / "glean_loop.txt").write_text(
            "TASK: CHECK FOR MISSED ENTITIES\nSay YES or NO, custom.\n", encoding="utf-8"
        )
        lib = p.PromptLibrary(tmp_path)
        assert "custom" in p.render_glean_loop(lib)
        assert "custom" not in p.render_glean_loop(p.PromptLibrary())

    def test_prompts_absent_from_override_dir_fall_back(self, tmp_path: Path) -> None:
        lib = p.PromptLibrary(tmp_path)
        assert p.render_glean_loop(lib) == p.render_glean_loop(p.PromptLibrary())

    def test_override_missing_required_value_fails_loudly(self, tmp_path: Path) -> None:
        (tmp_path / "community_rating.txt").write_text("Rate {report_text} for {audience}\n")
        with pytest.raises(p.PromptError, match="audience"):
            p.render_community_rating(p.PromptLibrary(tmp_path), question="q", report_text="r")

    def test_override_dropping_the_document_fails_loudly(self, tmp_path: Path) -> None:
        (tmp_path / "extract_graph.txt").write_text("Extract {entity_types} entities.\n")
        with pytest.raises(p.PromptError, match="input_text"):
            RENDERERS["extract_graph"](p.PromptLibrary(tmp_path))

    def test_override_may_write_delimiters_out(self, tmp_path: Path) -> None:
        (tmp_path / "glean_continue.txt").write_text("More, ending with <|COMPLETE|>\n")
        assert p.render_glean_continue(p.PromptLibrary(tmp_path)).startswith("More")

    def test_missing_override_dir_is_an_error(self, tmp_path: Path) -> None:
        with pytest.raises(p.PromptError):
            p.PromptLibrary(tmp_path / "nope")


class TestValidation:
    def test_unknown_prompt_name(self) -> None:
        with pytest.raises(p.PromptError, match="unknown prompt"):
            p.PromptLibrary().template("extract_everything")

    def test_extraction_without_entity_types_is_refused(self) -> None:
        with pytest.raises(p.PromptError):
            p.render_extract_graph(p.PromptLibrary(), entity_types=[], input_text="x")


class TestResponseModels:
    def test_report_example_in_prompt_parses(self) -> None:
        template = p.PromptLibrary().template("community_report")
        example = next(line for line in template.splitlines() if line.startswith('{"title"'))
        report = p.CommunityReportResponse.model_validate(json.loads(example))
        assert report.rating == 4.0 and report.findings[0].summary

    def test_report_rating_out_of_range_rejected(self) -> None:
        with pytest.raises(ValidationError):
            p.CommunityReportResponse(
                title="t", summary="s", rating=11, rating_explanation="", findings=[]
            )

    def test_map_scores_bounded(self) -> None:
        ok = p.MapResponse.model_validate({"points": [{"description": "d", "score": 100}]})
        assert ok.points[0].score == 100
        with pytest.raises(ValidationError):
            p.MapResponse.model_validate({"points": [{"description": "d", "score": 101}]})
