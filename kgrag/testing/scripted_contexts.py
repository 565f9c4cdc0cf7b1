"""Context answers of the scripted test model: GraphRAG's context tables (:func:`parse_tables`,
:class:`Row`), citations, community reports (one, or a batch of community blocks), global map
and reduce, local and basic search answers, report ratings and question generation.

Pure functions (no I/O) used by the dispatch in ``kgrag.testing.scripted_answers``. Reports and
answers cite only ids present in their input; map scores follow the word overlap with the
question (0 when none). A report prompt without its data raises :class:`RequestRejected`.
"""

from __future__ import annotations

import csv
import json
import re
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from kgrag.testing.scripted_text import RequestRejected, clip, last_labelled, phrases, words

_TABLES = (
    ("entit", "Entities"),
    ("relation", "Relationships"),
    ("claim", "Claims"),
    ("covariate", "Claims"),
    ("report", "Reports"),
    ("source", "Sources"),
    ("text unit", "Sources"),
)


@dataclass
class Row:
    id: str
    fields: list[str]

    @property
    def text(self) -> str:
        return " ".join(self.fields)


def _cells(line: str, sep: str) -> list[str]:
    """The cells of one line: ``,`` rows are CSV (quoted cells may hold commas), ``|`` rows
    are split as they are (query contexts remove ``|`` from cells)."""
    if sep == ",":
        return [c.strip() for c in next(csv.reader([line]), [])]
    return [c.strip() for c in line.split(sep)]


def parse_tables(text: str) -> dict[str, list[Row]]:
    """Tables in GraphRAG's context form: a heading line naming the table (``-----Entities-----``,
    ``Entities``), a header row starting with ``id``, then rows whose first field is the record
    id. The header row fixes the table's separator (``|`` in query contexts, CSV in report
    contexts); rows of a table without one are split by ``|`` when they hold one, else as CSV.
    """
    tables: dict[str, list[Row]] = defaultdict(list)
    current: str | None = None
    sep: str | None = None  # the current table's separator, from its header row
    for raw in text.splitlines():
        line = raw.strip()
        if not line:
            continue
        if line.startswith(("---", "===", "#")) or not ("|" in line or "," in line):
            low = line.lower()
            named = next((name for key, name in _TABLES if key in low), None)
            if named is not None:
                current, sep = named, None
            continue
        cells = _cells(line, sep or ("|" if "|" in line else ","))
        if not cells:
            continue
        if cells[0].lower() in {"id", "human_readable_id", "short_id"}:
            sep = "|" if "|" in line else ","
            continue
        if current is not None and re.fullmatch(r"[\w.:-]{1,80}", cells[0]):
            tables[current].append(Row(cells[0], cells[1:]))
    return dict(tables)


def _cite(groups: dict[str, list[str]]) -> str:
    parts = []
    for table, ids in groups.items():
        if ids:
            shown = ", ".join(ids[:5]) + (", +more" if len(ids) > 5 else "")
            parts.append(f"{table} ({shown})")
    return f"[Data: {'; '.join(parts)}]" if parts else ""


def _relevant(rows: list[Row], question: str) -> list[tuple[int, Row]]:
    q = words(question)
    scored = [(len(q & words(r.text)), r) for r in rows]
    return sorted((s for s in scored if s[0] > 0), key=lambda s: -s[0])


_CITATION_RE = re.compile(r"\s*\[Data:[^\]]*(?:\]|$)")


def _uncited(text: str) -> str:
    """``text`` without its own ``[Data: ...]`` citations: a sub-community's report cites
    records of *its* context, which the parent's context does not show."""
    return " ".join(_CITATION_RE.sub("", text).split())


def _report_data(prompt: str) -> str:
    """The real data of a report prompt: from its last ``Data:`` line to the ``Report:`` line
    where the answer goes. A ``Data:`` whose ``Report:`` is already answered is the worked
    example's, so the real data is missing."""
    at = last_labelled(prompt, "Data:")
    if at is None:
        raise RequestRejected("community report prompt has no Data: section")
    data, _, answered = prompt[at[0] + len("Data:") :].partition("\nReport:")
    if answered.strip().startswith("{"):
        raise RequestRejected("community report prompt has no Data: section after its example")
    return data


def _label(row: Row) -> str:
    """An entity's name or a report's title (the column after the id)."""
    return _uncited(row.fields[0]) if row.fields and row.fields[0] else row.id


def _report_findings(
    reports: list[Row], ents: list[Row], rels: list[Row], claims: list[Row]
) -> list[dict[str, str]]:
    """Sub-community reports first (the broad picture), then relationships, then claims."""
    findings = [
        {
            "summary": _label(r),
            "explanation": f"{clip(_uncited(' '.join(r.fields[1:])) or _label(r), 300)} "
            f"{_cite({'Reports': [r.id]})}",
        }
        for r in reports[:5]
    ]
    findings += [
        {
            "summary": " and ".join(_uncited(f) for f in r.fields[:2]),
            "explanation": f"{clip(_uncited(r.text), 300)} {_cite({'Relationships': [r.id]})}",
        }
        for r in rels[:5]
    ]
    if not findings and ents:
        cite = _cite({"Entities": [r.id for r in ents]})
        findings = [
            {"summary": _label(ents[0]), "explanation": f"{clip(_uncited(ents[0].text))} {cite}"}
        ]
    findings += [
        {
            "summary": f"Claim about {_label(r)}",
            "explanation": f"{clip(_uncited(r.text))} {_cite({'Claims': [r.id]})}",
        }
        for r in claims[:2]
    ]
    return findings


def _report_from_tables(data: str, what: str) -> dict[str, Any]:
    """One report drawn from the tables of ``data``, citing only ids those tables hold.

    A leaf's context lists entities (with relationships and claims); a parent's context, as
    GraphRAG's mixed context builds it, may instead list its sub-communities' reports, with
    only the relationships between sub-communities when those fill the budget. Either is a
    valid request; data with neither table is refused (``what`` names the data refused).
    """
    tables = parse_tables(data)
    ents, rels = tables.get("Entities", []), tables.get("Relationships", [])
    claims, reports = tables.get("Claims", []), tables.get("Reports", [])
    if not ents and not reports:
        raise RequestRejected(f"{what} has neither an entity nor a report table with ids")
    names = [_label(r) for r in ents] + [_label(r) for r in reports]
    cite_all = _cite(
        {
            "Reports": [r.id for r in reports],
            "Entities": [r.id for r in ents],
            "Relationships": [r.id for r in rels],
        }
    )
    parts = [f"{len(reports)} sub-communities"] if reports else []
    parts += [f"{len(ents)} entities"] if ents else []
    return {
        "title": f"Community of {', '.join(names[:3])}",
        "summary": f"The community links {' and '.join(parts)} through {len(rels)} "
        f"relationships, led by {names[0]}. {cite_all}",
        "rating": float(min(10, len(rels) + len(reports))),
        "rating_explanation": f"Rated by the number of relationships ({len(rels)})"
        + (f" and sub-community reports ({len(reports)})." if reports else "."),
        "findings": _report_findings(reports, ents, rels, claims),
    }


def answer_report(prompt: str) -> str:
    """A report of the one community whose context follows the prompt's last ``Data:``."""
    return json.dumps(_report_from_tables(_report_data(prompt), "community report prompt"))


_REAL_DATA_RE = re.compile(r"^=== Real data ===[ \t]*$", re.M)
_COMMUNITY_RE = re.compile(r"^Community:[ \t]*(.*)$", re.M)
_DATA_LINE_RE = re.compile(r"^Data:[ \t]*", re.M)
_REPORTS_LINE_RE = re.compile(r"^Reports:[ \t]*$", re.M)


def _report_blocks(prompt: str) -> list[tuple[str, str]]:
    """(community id, data) of each ``Community:`` block after ``=== Real data ===``, in
    order; the worked example's blocks come before that line and are not read. The data of
    a block runs from its ``Data:`` line to the next block, or to the closing ``Reports:``."""
    real = _REAL_DATA_RE.search(prompt)
    if real is None:
        raise RequestRejected("community reports prompt has no === Real data === section")
    section = prompt[real.end() :]
    closing = list(_REPORTS_LINE_RE.finditer(section))
    if closing:
        section = section[: closing[-1].start()]
    heads = list(_COMMUNITY_RE.finditer(section))
    if not heads:
        raise RequestRejected("community reports prompt has no Community: block in its real data")
    blocks: list[tuple[str, str]] = []
    for head, nxt in zip(heads, [*heads[1:], None], strict=True):
        cid = head.group(1).strip()
        if not cid:
            raise RequestRejected("community reports prompt has a Community: line without an id")
        body = section[head.end() : nxt.start() if nxt is not None else len(section)]
        data_at = _DATA_LINE_RE.search(body)
        if data_at is None:
            raise RequestRejected(f"community {cid} of the reports prompt has no Data: line")
        if any(cid == seen for seen, _ in blocks):
            raise RequestRejected(f"community reports prompt gives community {cid} twice")
        blocks.append((cid, body[data_at.end() :]))
    return blocks


def answer_reports(prompt: str) -> str:
    """One report per community block, in the given order, each built as
    :func:`answer_report` builds one and citing only ids of its own block's tables."""
    reports = [
        {"community": cid, **_report_from_tables(data, f"community {cid} of the reports prompt")}
        for cid, data in _report_blocks(prompt)
    ]
    return json.dumps({"reports": reports})


def answer_map(system: str, question: str) -> str:
    tables = parse_tables(system)
    rows = tables.get("Reports") or [r for rows in tables.values() for r in rows]
    points = [
        {
            "description": f"{clip(r.text, 200)} {_cite({'Reports': [r.id]})}",
            "score": min(100, 20 * overlap),
        }
        for overlap, r in _relevant(rows, question)
    ]
    if not points:
        points = [{"description": "The reports do not answer the question.", "score": 0}]
    return json.dumps({"points": points})


def answer_reduce(system: str) -> str:
    data = system.split("=== Analyst reports ===")[-1]
    cited = [line.strip() for line in data.splitlines() if "[Data:" in line]
    if not cited:
        return "I do not know: the analysts found nothing that answers the question."
    return "## Answer\n\n" + "\n\n".join(cited[:8])


def answer_search(system: str, question: str) -> str:
    tables = parse_tables(system)
    groups: dict[str, list[str]] = {}
    best: tuple[int, Row] | None = None
    for table, rows in tables.items():
        hits = _relevant(rows, question)
        groups[table] = [r.id for _, r in hits]
        if hits and (best is None or hits[0][0] > best[0]):
            best = hits[0]
    if best is None:
        return "I do not know: the data does not answer the question."
    return f"According to the data, {clip(best[1].text, 300)} {_cite(groups)}"


def answer_rating(prompt: str) -> str:
    question = last_labelled(prompt, "Question:")
    report = prompt.split("\nReport:", 1)[-1].split("Rate how relevant")[0]
    overlap = len(words(question[1] if question else "") & words(report))
    return json.dumps({"rating": min(5, overlap), "reason": f"{overlap} words in common"})


def answer_confirm_alias(prompt: str) -> str:
    """Strict about the alias prompt: both names, the evidence and at least one passage, and
    the answer's JSON shape asked for; says "same" when a passage names both (the shorter
    name's words all inside one passage that holds the longer name), else not."""
    fields = {}
    for label in ("Name A:", "Name B:", "Why they were matched:"):
        found = last_labelled(prompt, label)
        if not found or not found[1].strip():
            raise RequestRejected(f"an alias confirmation without {label!r}")
        fields[label] = found[1].strip()
    if "\nPassages:\n[1] " not in prompt:
        raise RequestRejected("an alias confirmation without numbered passages")
    if '{"same": true, "reason":' not in prompt:
        raise RequestRejected("an alias confirmation that does not ask for its JSON answer")
    a, b = sorted((fields["Name A:"].lower(), fields["Name B:"].lower()), key=len)
    passages = prompt.split("\nPassages:\n", 1)[1].lower().split("\n[")
    same = any(b in p and all(w in p for w in a.split()) for p in passages)
    why = "a passage names both" if same else "no passage names both"
    return json.dumps({"same": same, "reason": why})


def answer_questions(prompt: str) -> str:
    count_at = last_labelled(prompt, "Number of questions:")
    count = int(count_at[1]) if count_at and count_at[1].isascii() and count_at[1].isdigit() else 3
    ents = parse_tables(prompt).get("Entities", [])
    names = [r.fields[0] if r.fields else r.id for r in ents] or ["the main entities"]
    templates = (
        "What is the role of {}?",
        "How is {} connected to the others?",
        "What happened to {} recently?",
    )
    qs = [templates[i % 3].format(names[i % len(names)]) for i in range(count)]
    return "\n".join(f"- {q}" for q in qs)


# ---- DRIFT --------------------------------------------------------------------------------

_UP_TO = re.compile(r"follow_up_queries: up to (\d+)")


def _drift_shape(system: str, answer_key: str, what: str) -> int:
    """Strict about a DRIFT prompt's JSON shape: the answer key, the score and the follow-up
    list asked for, with how many follow-ups at most; returns that number."""
    for needed in (f'"{answer_key}":', '"score":', '"follow_up_queries":'):
        if needed not in system:
            raise RequestRejected(f"{what} does not ask for {needed} in its JSON answer")
    found = _UP_TO.search(system)
    if found is None:
        raise RequestRejected(f"{what} does not say how many follow-up queries to ask")
    return int(found.group(1))


def _section(system: str, header: str, what: str) -> str:
    if header not in system:
        raise RequestRejected(f"{what} has no {header} section")
    body = system.split(header, 1)[1].split("\n=== ", 1)[0].strip()
    if not body:
        raise RequestRejected(f"{what}'s {header} section is empty")
    return body


def _followups(rows: list[Row], question: str, n: int) -> list[str]:
    """Questions about the names in ``rows`` the question does not name, best rows first."""
    asked = words(question)
    names: list[str] = []
    for r in rows:
        for phrase, _ in phrases(_uncited(r.text)):
            if phrase not in names and not words(phrase) <= asked and len(phrase) > 3:
                names.append(phrase)
    return [f"What did {name} do?" for name in names[:n]]


def answer_drift_primer(system: str, question: str) -> str:
    """A first answer from the reports that share words with the question (score by the
    overlap); when none does, a broad answer from the first reports given (they were chosen
    as the nearest), scored low. Follow-ups ask about the names those reports carry."""
    what = "a DRIFT primer prompt"
    n = _drift_shape(system, "intermediate_answer", what)
    reports = parse_tables(_section(system, "=== Reports ===", what)).get("Reports", [])
    if not reports:
        raise RequestRejected(f"{what} has no Reports table with ids")
    hits = _relevant(reports, question)
    rows = [r for _, r in hits][:3] or reports[:3]
    score = min(100, 20 * hits[0][0]) if hits else 10
    answer = " ".join(f"{clip(_uncited(r.text), 200)} {_cite({'Reports': [r.id]})}" for r in rows)
    body = {
        "intermediate_answer": answer,
        "score": score,
        "follow_up_queries": _followups(rows, question, n),
    }
    return json.dumps(body)


def answer_drift_local(system: str, question: str) -> str:
    """Local search's scripted answer to the follow-up, scored by the overlap of its best
    record with the follow-up and the overall question; follow-ups from its best records."""
    what = "a DRIFT follow-up prompt"
    n = _drift_shape(system, "response", what)
    overall = _section(system, "=== Overall question ===", what)
    tables = parse_tables(_section(system, "=== Data tables ===", what))
    best = sorted(
        ((o, r) for rows in tables.values() for o, r in _relevant(rows, question)),
        key=lambda s: -s[0],
    )
    if not best:
        body: dict[str, Any] = {
            "response": "The data does not answer this follow-up.",
            "score": 0,
            "follow_up_queries": [],
        }
        return json.dumps(body)
    score = min(100, 10 * best[0][0] + 10 * len(words(overall) & words(best[0][1].text)))
    body = {
        "response": answer_search(system, question),
        "score": max(1, score),
        "follow_up_queries": _followups([r for _, r in best[:3]], question, n),
    }
    return json.dumps(body)


def answer_drift_reduce(system: str) -> str:
    """The intermediate answers' cited sentences, best answer first."""
    data = _section(system, "=== Intermediate answers ===", "a DRIFT reduce prompt")
    if "----Answer 1----" not in data:
        raise RequestRejected("a DRIFT reduce prompt has no numbered intermediate answers")
    cited = [line.strip() for line in data.splitlines() if "[Data:" in line]
    if not cited:
        return "I do not know: the intermediate answers found nothing that answers the question."
    return "## Answer\n\n" + "\n\n".join(cited[:8])


# ---- strict about the query prompts --------------------------------------------------------

# kind -> the sections its prompt must carry, and whether it must ask for a JSON answer
QUERY_PROMPTS: dict[str, tuple[tuple[str, ...], bool]] = {
    "local_search": (("=== How to answer ===", "=== Data tables ==="), False),
    "basic_search": (("=== How to answer ===", "=== Sources ==="), False),
    "global_map": (("=== How to answer ===", "=== Reports ==="), True),
    "global_reduce": (("=== How to answer ===", "=== Analyst reports ==="), False),
    "question_generation": (("=== How to answer ===", "=== Data tables ==="), False),
    "community_rating": ((), True),
    "drift_primer": (("=== How to answer ===", "=== Reports ==="), True),
    "drift_local": (("=== How to answer ===", "=== Data tables ==="), True),
    "drift_reduce": (("=== How to answer ===", "=== Intermediate answers ==="), False),
    # Microsoft GraphRAG's own local and basic search prompts (``graphrag.prompts.query``),
    # for tests that run GraphRAG's query engine on an export
    "graphrag_search": (("---Role---", "---Data tables---", "---Goal---"), False),
}


def is_graphrag_search(system: str) -> bool:
    """A system prompt of GraphRAG's local or basic search: its role, then its data tables."""
    return system.lstrip().startswith("---Role---") and "---Data tables---" in system


def answer_graphrag_search(system: str, question: str) -> str:
    """Its data tables (between ``---Data tables---`` and the closing goal) answered like
    ours; an empty or unfilled section is refused."""
    data = system.split("---Data tables---", 1)[1].split("---Goal---", 1)[0]
    if data.strip().startswith("id|"):  # basic search's one table has no heading: sources
        data = f"-----Sources-----\n{data.strip()}"
    if "{context_data}" in data or not parse_tables(data):
        raise RequestRejected("a GraphRAG search prompt whose ---Data tables--- hold no table")
    return answer_search(data, question)


def check_query_prompt(kind: str, prompt: str, json_mode: bool | None) -> None:
    """Refuse a query prompt without its sections, without the citation form it must ask for
    (answers that cite), or sent without JSON mode when its answer is JSON (``json_mode`` None:
    not known, as for in-process callers)."""
    if kind not in QUERY_PROMPTS:
        return
    sections, wants_json = QUERY_PROMPTS[kind]
    what = f"a {kind.replace('_', ' ')} prompt"
    for header in sections:
        if header not in prompt:
            raise RequestRejected(f"{what} has no {header} section")
    if kind not in ("question_generation", "community_rating") and "[Data:" not in prompt:
        raise RequestRejected(f"{what} does not ask for citations in the [Data: …] form")
    if wants_json and json_mode is False:
        raise RequestRejected(f"{what} asks for JSON but the request is not in JSON mode")
