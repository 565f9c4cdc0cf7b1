"""What the scripted test model answers: each request kind's answer derived from its input.

Pure functions (no I/O) used by ``kgrag.testing.scripted_llm``. Requests are recognised by the
first line of each prompt, ``TASK: ...`` (``prompts.TASK_MARKERS``); a request a strict model
would refuse raises :class:`RequestRejected`. Answers are cheap and deterministic: capitalised
phrases become typed entities, entities of one sentence are related, reports and answers cite
only ids present in their input, map scores follow the word overlap with the question.
"""

from __future__ import annotations

import csv
import hashlib
import itertools
import json
import math
import re
from collections import Counter, defaultdict
from dataclasses import dataclass
from typing import Any

from prompts import TASK_MARKERS

TUPLE, RECORD, COMPLETE = "<|>", "##", "<|COMPLETE|>"

# request kind -> marker; kinds are the prompt names without the "_system" suffix
KINDS: dict[str, str] = {name.removesuffix("_system"): m for name, m in TASK_MARKERS.items()}
_SYSTEM_KINDS = {"local_search", "basic_search", "global_map", "global_reduce"}


class RequestRejected(Exception):
    """The request is one a strict model would refuse (answered with HTTP 400)."""


# ==== text helpers =========================================================================

_SENT_RE = re.compile(r"(?<=[.!?])\s+")
_PHRASE_RE = re.compile(r"[A-Z][\w&'.-]*(?:\s+(?:of\s+|de\s+|and\s+)?[A-Z][\w&'.-]*)*")
_WORD_RE = re.compile(r"[a-z0-9]+")


def _wordset(text: str) -> frozenset[str]:
    return frozenset(w.replace("_", " ") for w in text.split())


_STOP_START = _wordset(
    "The A An In On At It He She They We I This That These Those But And Or If For As By With "
    "From After Before When While Its His Her Their Our Shares Under Also Chief Executive Mr Mrs "
    "Ms Dr Monday Tuesday Wednesday Thursday Friday Saturday Sunday January February March "
    "April May June July August September October November December"
)
_STOPWORDS = _wordset(
    "the a an and or of to in on at for by with from is are was were be been it its this that "
    "what which who whom how why when where does did do about into over than then there their "
    "they them he she his her our we you your not no yes any some"
)
_ORG_WORDS = _wordset(
    "inc corp co ltd plc bank group company corporation ministry commission reserve exchange "
    "association council agency party board fund bureau department university union opec "
    "airlines motors"
)
_EVENT_WORDS = _wordset("summit conference war election crisis strike talks olympics")
_GEO_WORDS = _wordset("city river island state province county republic kingdom")
_GEO_NAMES = _wordset(
    "u.s. us united_states japan britain china france germany west_germany canada brazil "
    "argentina mexico india italy spain australia london new_york tokyo paris washington "
    "frankfurt hong_kong rotterdam europe saudi_arabia iran iraq kuwait soviet_union moscow "
    "chicago zurich"
)
_PERSON_TITLES = _wordset("mr mrs ms dr president minister chairman chief governor")


def sentences(text: str) -> list[str]:
    return [s.strip() for s in _SENT_RE.split(text.strip()) if s.strip()]


def words(text: str) -> set[str]:
    return {w for w in _WORD_RE.findall(text.lower()) if w not in _STOPWORDS and len(w) > 2}


def n_tokens(text: str) -> int:
    return max(1, math.ceil(len(text) / 4))


def _clip(text: str, limit: int = 220) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def _entity_type(phrase: str, before: str) -> str:
    lower = phrase.lower()
    tokens = lower.replace(".", " ").split()
    if (_ORG_WORDS & set(tokens)) or (phrase.isupper() and len(phrase) <= 5):
        return "organization"
    if _EVENT_WORDS & set(tokens):
        return "event"
    if lower in _GEO_NAMES or (tokens and tokens[-1] in _GEO_WORDS):
        return "geo"
    prev = before.rstrip().rsplit(" ", 1)[-1].lower().rstrip(".") if before.strip() else ""
    if prev in _PERSON_TITLES or len(phrase.split()) in (2, 3):
        return "person"
    return "organization"


# ==== deriving answers from the input ========================================================


@dataclass
class Entity:
    name: str
    type: str
    description: str
    sentence: int


def _phrases(sent: str) -> list[tuple[str, int]]:
    """Capitalised phrases with their offsets, minus leading function words and dates; "X of
    Y" stays one phrase only when X ends with an organisation word (Bank of Japan)."""
    out: list[tuple[str, int]] = []
    for m in _PHRASE_RE.finditer(sent):
        pieces = [m.group(0)]
        for joiner in (" of ", " and ", " de "):
            pieces = [q for p in pieces for q in _split_join(p, joiner)]
        for piece in pieces:
            parts = piece.split()
            while parts and parts[0] in _STOP_START:
                parts.pop(0)
            phrase = " ".join(parts).rstrip(".'")
            if len(phrase) >= 2:
                out.append((phrase, m.start() + max(0, m.group(0).find(phrase))))
    return out


def _split_join(phrase: str, joiner: str) -> list[str]:
    if joiner not in phrase:
        return [phrase]
    left, right = phrase.split(joiner, 1)
    if left.split()[-1].lower() in _ORG_WORDS:
        return [phrase]
    return [left, *_split_join(right, joiner)]


def derive_entities(text: str, types: list[str]) -> list[Entity]:
    """Capitalised phrases (minus sentence-initial function words), typed by simple rules,
    kept when their type was asked for; in order of first appearance."""
    wanted = {t.strip().lower() for t in types}
    found: dict[str, Entity] = {}
    for i, sent in enumerate(sentences(text)):
        for phrase, at in _phrases(sent):
            if phrase.upper() in found:
                continue
            etype = _entity_type(phrase, sent[:at])
            if etype in wanted:
                desc = f"{phrase} is mentioned in the article: {_clip(sent)}"
                found[phrase.upper()] = Entity(phrase.upper(), etype, desc, i)
    return list(found.values())


def derive_relationships(text: str, ents: list[Entity]) -> list[tuple[str, str, str, int]]:
    """Pairs of entities named in one sentence: (source, target, description, strength)."""
    sents = sentences(text)
    counts: Counter[tuple[str, str]] = Counter()
    first: dict[tuple[str, str], str] = {}
    for sent in sents:
        here = [e.name for e in ents if e.name.lower() in sent.lower()]
        for a, b in itertools.combinations(here, 2):
            counts[(a, b)] += 1
            first.setdefault((a, b), sent)
    return [
        (a, b, f"{a} and {b} appear together: {_clip(first[(a, b)])}", min(10, 3 + n))
        for (a, b), n in counts.items()
    ]


def format_records(ents: list[Entity], rels: list[tuple[str, str, str, int]]) -> str:
    records = [f'("entity"{TUPLE}{e.name}{TUPLE}{e.type}{TUPLE}{e.description})' for e in ents]
    records += [f'("relationship"{TUPLE}{a}{TUPLE}{b}{TUPLE}{d}{TUPLE}{s})' for a, b, d, s in rels]
    return f"\n{RECORD}\n".join(records) + f"\n{COMPLETE}"


def _last_labelled(text: str, label: str) -> tuple[int, str] | None:
    """Position and value of the last line starting with ``label`` (the real data follows
    the worked examples, which use the same labels)."""
    hits = [m for m in re.finditer(rf"^{re.escape(label)}[ \t]*(.*)$", text, re.M)]
    return (hits[-1].start(), hits[-1].group(1).strip()) if hits else None


def parse_extraction_prompt(prompt: str) -> tuple[list[str], str]:
    """Entity types and chunk text of an extraction prompt, or RequestRejected saying what
    is missing."""
    types_at = _last_labelled(prompt, "Entity types:")
    if types_at is None or not types_at[1] or "{" in types_at[1]:
        raise RequestRejected("extraction prompt lacks the entity types")
    head, tail = prompt[: types_at[0]], prompt[types_at[0] :]
    missing = [d for d in (TUPLE, RECORD, COMPLETE) if d not in head]
    if missing:
        raise RequestRejected(f"extraction prompt lacks the delimiters {missing}")
    if not re.search(rf'\("entity"{re.escape(TUPLE)}[^<{{]', head):  # a filled-in record
        raise RequestRejected("extraction prompt lacks worked examples")
    m = re.search(r"^Text:[ \t]*\n?(.*?)(?:^Output:.*)?\Z", tail, re.S | re.M)
    chunk = m.group(1).strip() if m else ""
    if not chunk or chunk == "{input_text}":
        raise RequestRejected("extraction prompt lacks the chunk text")
    types = [t.strip() for t in re.split(r"[,;]", types_at[1]) if t.strip()]
    return types, chunk


def _split_for_gleaning(ents: list[Entity]) -> tuple[list[Entity], list[Entity]]:
    held = len(ents) // 4 if len(ents) >= 3 else 0
    return ents[: len(ents) - held], ents[len(ents) - held :]


def answer_extraction(prompt: str) -> str:
    types, chunk = parse_extraction_prompt(prompt)
    ents = derive_entities(chunk, types)
    first, _ = _split_for_gleaning(ents)
    return format_records(first, derive_relationships(chunk, first))


def _gleaning_context(messages: list[dict[str, Any]]) -> tuple[list[Entity], list[Entity], str]:
    """All entities of the chunk, those already given, and the chunk; checks that the turn
    carries the earlier answer."""
    if (
        len(messages) < 3
        or messages[-2].get("role") != "assistant"
        or not content_text(messages[-2])
    ):
        raise RequestRejected("gleaning turn lacks the earlier answer as an assistant message")
    first_user = next((m for m in messages if m.get("role") == "user"), None)
    if first_user is None or not content_text(first_user).startswith(KINDS["extract_graph"]):
        raise RequestRejected("gleaning turn is not part of an extraction conversation")
    types, chunk = parse_extraction_prompt(content_text(first_user))
    ents = derive_entities(chunk, types)
    said = "\n".join(content_text(m) for m in messages if m.get("role") == "assistant")
    given = [e for e in ents if f"{TUPLE}{e.name}{TUPLE}" in said]
    return ents, given, chunk


def answer_glean_continue(messages: list[dict[str, Any]]) -> str:
    ents, given, chunk = _gleaning_context(messages)
    new = [e for e in ents if e not in given]
    new_names = {e.name for e in new}
    rels = [r for r in derive_relationships(chunk, ents) if new_names & {r[0], r[1]}]
    return format_records(new, rels) if new else COMPLETE


def answer_glean_loop(messages: list[dict[str, Any]]) -> str:
    ents, given, _ = _gleaning_context(messages)
    return "YES" if len(given) < len(ents) else "NO"


def answer_claims(prompt: str) -> str:
    spec = _last_labelled(prompt, "Entity specification:")
    text_at = prompt.rfind("\nText:")
    if spec is None or not spec[1] or text_at < 0:
        raise RequestRejected("claim prompt lacks the entity specification or the text")
    chunk = prompt[text_at + 6 :].split("\nOutput:")[0].strip()
    spec_words = {s.strip().lower() for s in spec[1].split(",")}
    ents = [
        e
        for e in derive_entities(chunk, ["organization", "person", "geo", "event"])
        if e.type in spec_words or e.name.lower() in spec_words
    ]
    records = []
    for i, sent in enumerate(sentences(chunk)):
        named = [e for e in ents if e.name.lower() in sent.lower()]
        if not named:
            continue
        low = sent.lower()
        status = "FALSE" if " denied" in low or " not " in low else "TRUE"
        if re.search(r"\b(expects?|may|could|plans?|alleged|accused)\b", low):
            status = "SUSPECTED"
        obj = named[1].name if len(named) > 1 else "NONE"
        date = re.search(r"\b\d{4}-\d{2}-\d{2}\b", sent)
        d = date.group(0) if date else "NONE"
        records.append(
            TUPLE.join(
                [
                    named[0].name,
                    obj,
                    "STATEMENT",
                    status,
                    d,
                    d,
                    f"Sentence {i + 1} states: {_clip(sent)}",
                    _clip(sent, 160),
                ]
            )
        )
    return f"\n{RECORD}\n".join(f"({r})" for r in records) + f"\n{COMPLETE}"


def answer_summary(prompt: str) -> str:
    """Distinct description sentences, the most representative (shared words) first."""
    name = _last_labelled(prompt, "Entity:")
    listed = re.findall(r"^- (.+)$", prompt.split("Descriptions:")[-1], re.M)
    if name is None or not listed:
        raise RequestRejected("summary prompt lacks the entity or its descriptions")
    sents = list(dict.fromkeys(s for d in listed for s in sentences(d)))
    bag = Counter(w for s in sents for w in words(s))
    ranked = sorted(sents, key=lambda s: -sum(bag[w] for w in words(s)) / (1 + len(words(s))))
    return f"{name[1]}: " + " ".join(ranked)


# ---- tables of ids in contexts ---------------------------------------------------------------

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
    at = _last_labelled(prompt, "Data:")
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
            "explanation": f"{_clip(_uncited(' '.join(r.fields[1:])) or _label(r), 300)} "
            f"{_cite({'Reports': [r.id]})}",
        }
        for r in reports[:5]
    ]
    findings += [
        {
            "summary": " and ".join(_uncited(f) for f in r.fields[:2]),
            "explanation": f"{_clip(_uncited(r.text), 300)} {_cite({'Relationships': [r.id]})}",
        }
        for r in rels[:5]
    ]
    if not findings and ents:
        cite = _cite({"Entities": [r.id for r in ents]})
        findings = [
            {"summary": _label(ents[0]), "explanation": f"{_clip(_uncited(ents[0].text))} {cite}"}
        ]
    findings += [
        {
            "summary": f"Claim about {_label(r)}",
            "explanation": f"{_clip(_uncited(r.text))} {_cite({'Claims': [r.id]})}",
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
            "description": f"{_clip(r.text, 200)} {_cite({'Reports': [r.id]})}",
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
    return f"According to the data, {_clip(best[1].text, 300)} {_cite(groups)}"


def answer_rating(prompt: str) -> str:
    question = _last_labelled(prompt, "Question:")
    report = prompt.split("\nReport:", 1)[-1].split("Rate how relevant")[0]
    overlap = len(words(question[1] if question else "") & words(report))
    return json.dumps({"rating": min(5, overlap), "reason": f"{overlap} words in common"})


def answer_questions(prompt: str) -> str:
    count_at = _last_labelled(prompt, "Number of questions:")
    count = int(count_at[1]) if count_at and count_at[1].isdigit() else 3
    ents = parse_tables(prompt).get("Entities", [])
    names = [r.fields[0] if r.fields else r.id for r in ents] or ["the main entities"]
    templates = (
        "What is the role of {}?",
        "How is {} connected to the others?",
        "What happened to {} recently?",
    )
    qs = [templates[i % 3].format(names[i % len(names)]) for i in range(count)]
    return "\n".join(f"- {q}" for q in qs)


# ==== dispatch ================================================================================


def content_text(message: dict[str, Any]) -> str:
    content = message.get("content") or ""
    if isinstance(content, list):  # content parts
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return str(content).lstrip()


def classify(messages: list[dict[str, Any]]) -> str:
    users = [m for m in messages if m.get("role") == "user"]
    if users:
        text = content_text(users[-1])
        for kind, marker in KINDS.items():
            if kind not in _SYSTEM_KINDS and text.startswith(marker):
                return kind
    for m in messages:
        if m.get("role") in ("system", "developer"):
            text = content_text(m)
            for kind, marker in KINDS.items():
                if text.startswith(marker):
                    return kind
    return "unknown"


def answer(kind: str, messages: list[dict[str, Any]]) -> str:
    """The scripted model: a well-formed answer derived from the request, or RequestRejected."""
    users = [content_text(m) for m in messages if m.get("role") == "user"]
    system = "\n".join(
        content_text(m) for m in messages if m.get("role") in ("system", "developer")
    )
    last = users[-1] if users else ""
    match kind:
        case "extract_graph":
            return answer_extraction(last)
        case "glean_continue":
            return answer_glean_continue(messages)
        case "glean_loop":
            return answer_glean_loop(messages)
        case "extract_claims":
            return answer_claims(last)
        case "summarize_descriptions":
            return answer_summary(last)
        case "community_report":
            return answer_report(last)
        case "community_reports":
            return answer_reports(last)
        case "global_map":
            return answer_map(system, last)
        case "global_reduce":
            return answer_reduce(system)
        case "local_search" | "basic_search":
            return answer_search(system, last)
        case "community_rating":
            return answer_rating(last)
        case "question_generation":
            return answer_questions(last)
    return "OK."


def malform(kind: str, text: str) -> str:
    """Output that ignores the requested format."""
    if text.lstrip().startswith("{"):
        return "Here is the report you asked for: title is " + text[:40]
    return f"Sure! I found these: {text[:60].replace(TUPLE, ' - ')}... (format ignored)"


def truncate(text: str) -> str:
    """Cut mid-record (or mid-JSON) and drop the completion delimiter."""
    body = text.replace(COMPLETE, "").rstrip()
    return body[: max(1, int(len(body) * 0.6))]


def embed_text(text: str, dim: int) -> list[float]:
    """Feature hashing of the words: deterministic, and texts sharing words are close."""
    vec = [0.0] * dim
    for w in _WORD_RE.findall(text.lower()) or [""]:
        h = hashlib.blake2b(w.encode(), digest_size=8).digest()
        idx = int.from_bytes(h[:4], "little") % dim
        vec[idx] += 1.0 if h[4] & 1 else -1.0
    norm = math.sqrt(sum(v * v for v in vec)) or 1.0
    if norm == 1.0 and not any(vec):
        vec[0] = 1.0
    return [v / norm for v in vec]
