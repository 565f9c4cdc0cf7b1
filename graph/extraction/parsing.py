"""Read GraphRAG's delimited-tuple extraction output, strictly but forgivingly.

The model answers ``("entity"<|>NAME<|>TYPE<|>DESCRIPTION)##("relationship"<|>SOURCE<|>TARGET
<|>DESCRIPTION<|>STRENGTH)##…<|COMPLETE|>`` and, for claims, ``(SUBJECT<|>OBJECT<|>CLAIM_TYPE<|>
STATUS<|>START_DATE<|>END_DATE<|>DESCRIPTION<|>SOURCE_QUOTES)`` records. Models drift from the
format in harmless ways, so the parser forgives: quotes around fields, stray whitespace and line
breaks (also a line break instead of ``##`` between two parenthesised records), prose before the
first record, the record type's case, a missing completion delimiter (or one in lower case), and
a strength given as text. Strength is read as follows and then clamped to 1..10: a number
("8", "8.0", "8 (strong)"), a fraction scaled to ten ("8/10", "4/5" → 8), or a number word
("one" … "ten"); anything else is 1.0, the weakest link, as Microsoft's parser does.

What it does not forgive it drops and counts, never half-keeps: a record of the wrong arity, an
unknown record type, an empty name, a relationship from an entity to itself, a relationship naming
an entity that the same output (all turns of one conversation, see :func:`parse_graph_outputs`)
does not define, a claim with an empty subject or a status other than TRUE/FALSE/SUSPECTED.
Text after the completion delimiter is ignored. Duplicates combine: entity records with the same
key (graph.keys) keep the first name and type and join their distinct descriptions; relationship
records of the same undirected pair keep the first direction, join descriptions and average
strengths. Types are lower-cased (an empty type becomes "unknown"); claim types and statuses are
upper-cased; a claim date that is ``NONE`` or not ISO 8601 becomes ``None``.

Document text is run through :func:`sanitize_input_text` before it enters a prompt, so text that
imitates the delimiters cannot become records even if the model copies it into its answer.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Literal, cast

from graph.keys import entity_key, relationship_key
from graph.model import ClaimMention, EntityMention, RelationshipMention

TUPLE_DELIMITER = "<|>"
RECORD_DELIMITER = "##"
COMPLETION_DELIMITER = "<|COMPLETE|>"

_COMPLETION = re.compile(re.escape(COMPLETION_DELIMITER), re.IGNORECASE)
_RECORD_SPLIT = re.compile(re.escape(RECORD_DELIMITER) + r"|(?<=\))[ \t]*\r?\n\s*(?=\()")
_PIPE_IN_DELIMITER = re.compile(r"(?<=<)\||\|(?=>)")
_HASH_RUN = re.compile(r"#{2,}")
_SPACE = re.compile(r"\s+")
_QUOTE_PAIRS = {'"': '"', "'": "'", "`": "`", "“": "”", "‘": "’"}
_NUMBER = re.compile(r"([+-]?\d+(?:\.\d+)?)(?:\s*/\s*(\d+(?:\.\d+)?))?")
_NUMBER_WORDS = {
    word: float(i)
    for i, word in enumerate(
        ("one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten"), start=1
    )
}
_STATUSES = frozenset({"TRUE", "FALSE", "SUSPECTED"})
_NONE_WORDS = frozenset({"", "none", "null", "n/a", "unknown"})
_DEFAULT_STRENGTH = 1.0
_ENTITY_ARITY = 4
_RELATIONSHIP_ARITY = 5
_CLAIM_ARITY = 8

ClaimStatus = Literal["TRUE", "FALSE", "SUSPECTED"]


@dataclass(frozen=True, slots=True)
class ParsedGraph:
    """Entities and relationships read from one conversation's answers."""

    entities: tuple[EntityMention, ...]
    relationships: tuple[RelationshipMention, ...]
    dropped: int  # records discarded; len(drop_reasons) == dropped
    drop_reasons: tuple[str, ...]
    complete: bool = False  # every answer carried the completion delimiter


@dataclass(frozen=True, slots=True)
class ParsedClaims:
    claims: tuple[ClaimMention, ...]
    dropped: int
    drop_reasons: tuple[str, ...]
    complete: bool = False


def sanitize_input_text(text: str) -> str:
    """Neutralise delimiter sequences in document text before it goes into a prompt.

    A ``|`` touching ``<`` or ``>`` becomes ``¦`` (so ``<|>`` and ``<|COMPLETE|>`` cannot
    occur) and a run of ``#`` collapses to one (so ``##`` cannot). Neither replacement can
    create a new delimiter, so one pass suffices and the function is idempotent.
    """
    return _HASH_RUN.sub("#", _PIPE_IN_DELIMITER.sub("¦", text))


def parse_graph_output(text: str, chunk_id: str) -> ParsedGraph:
    """Entities and relationships of one answer; never raises on any text."""
    return parse_graph_outputs((text,), chunk_id)


def parse_graph_outputs(texts: Sequence[str], chunk_id: str) -> ParsedGraph:
    """Parse the answers of one gleaning conversation together.

    A relationship in a later answer may name an entity defined in an earlier one, so
    relationships are checked against the entities of all answers.
    """
    drops: list[str] = []
    entity_rows: list[list[str]] = []
    relationship_rows: list[list[str]] = []
    complete = True
    for text in texts:
        records, done = split_records(text)
        complete = complete and done
        for fields in records:
            _route(fields, entity_rows, relationship_rows, drops)
    entities = _combine_entities(entity_rows, chunk_id, drops)
    known = {entity_key(e.name) for e in entities}
    relationships = _combine_relationships(relationship_rows, known, chunk_id, drops)
    return ParsedGraph(entities, relationships, len(drops), tuple(drops), complete and bool(texts))


def parse_claims_output(text: str, chunk_id: str) -> ParsedClaims:
    """Claims of one answer; never raises on any text."""
    drops: list[str] = []
    claims: dict[tuple[object, ...], ClaimMention] = {}
    records, complete = split_records(text)
    for fields in records:
        claim = _claim(fields, chunk_id, drops)
        if claim is not None:
            claims.setdefault(_claim_identity(claim), claim)
    return ParsedClaims(tuple(claims.values()), len(drops), tuple(drops), complete)


def split_records(text: str) -> tuple[list[list[str]], bool]:
    """The field lists of each record, and whether the completion delimiter was seen."""
    body, *rest = _COMPLETION.split(text, maxsplit=1)
    records = [_fields(piece) for piece in _RECORD_SPLIT.split(body) if piece.strip()]
    return records, bool(rest)


def _fields(record: str) -> list[str]:
    """Split one record on the tuple delimiter and peel the parentheses off its ends."""
    parts = record.split(TUPLE_DELIMITER)
    first = parts[0]
    if "(" in first:
        first = first[first.rindex("(") + 1 :]
    parts[0] = first
    parts[-1] = _before_closing_paren(parts[-1])
    return [clean_field(p) for p in parts]


def _before_closing_paren(text: str) -> str:
    """Cut at the ``)`` that closes the record; prose after it is not part of the field."""
    depth = 0
    for i, char in enumerate(text):
        if char == "(":
            depth += 1
        elif char == ")":
            if depth == 0:
                return text[:i]
            depth -= 1
    return text


def clean_field(text: str) -> str:
    """Collapse whitespace and remove quotes that wrap the whole field (and no more)."""
    text = _SPACE.sub(" ", text).strip()
    while len(text) >= 2 and _QUOTE_PAIRS.get(text[0]) == text[-1]:
        inner = text[1:-1]
        if text[0] in inner or text[-1] in inner:
            break
        text = inner.strip()
    return text


def _route(
    fields: list[str],
    entities: list[list[str]],
    relationships: list[list[str]],
    drops: list[str],
) -> None:
    if len(fields) == 1:
        drops.append("not a record: no tuple delimiter")
        return
    kind = fields[0].lower()
    expected = {"entity": _ENTITY_ARITY, "relationship": _RELATIONSHIP_ARITY}.get(kind)
    if expected is None:
        drops.append(f"unknown record type {fields[0][:40]!r}")
    elif len(fields) != expected:
        drops.append(f"{kind}: expected {expected} fields, got {len(fields)}")
    else:
        (entities if kind == "entity" else relationships).append(fields[1:])


def _combine_entities(
    rows: Iterable[list[str]], chunk_id: str, drops: list[str]
) -> tuple[EntityMention, ...]:
    merged: dict[str, tuple[str, str, list[str]]] = {}
    for name, etype, description in rows:
        key = entity_key(name)
        if not key:
            drops.append("entity: empty name")
            continue
        first_name, first_type, descriptions = merged.setdefault(key, (name, "", []))
        if not first_type and etype:
            merged[key] = (first_name, etype.lower(), descriptions)
        if description and description not in descriptions:
            descriptions.append(description)
    return tuple(
        EntityMention(name, etype or "unknown", "\n".join(descs), chunk_id)
        for name, etype, descs in merged.values()
    )


def _combine_relationships(
    rows: Iterable[list[str]], known: set[str], chunk_id: str, drops: list[str]
) -> tuple[RelationshipMention, ...]:
    merged: dict[str, tuple[str, str, list[str], list[float]]] = {}
    for source, target, description, strength in rows:
        reason = _relationship_problem(source, target, known)
        if reason:
            drops.append(f"relationship: {reason}")
            continue
        entry = merged.setdefault(relationship_key(source, target), (source, target, [], []))
        if description and description not in entry[2]:
            entry[2].append(description)
        entry[3].append(parse_strength(strength))
    return tuple(
        RelationshipMention(src, tgt, "\n".join(descs), sum(ss) / len(ss), chunk_id)
        for src, tgt, descs, ss in merged.values()
    )


def _relationship_problem(source: str, target: str, known: set[str]) -> str | None:
    skey, tkey = entity_key(source), entity_key(target)
    if not skey or not tkey:
        return "empty endpoint name"
    if skey == tkey:
        return "links an entity to itself"
    if skey not in known or tkey not in known:
        return "names an entity the output does not define"
    return None


def parse_strength(text: str) -> float:
    """A relationship strength in 1..10 from the forms models write; 1.0 if unreadable."""
    text = clean_field(text).lower().rstrip(".")
    if text in _NUMBER_WORDS:
        return _NUMBER_WORDS[text]
    match = _NUMBER.match(text)
    if match is None:
        return _DEFAULT_STRENGTH
    value = float(match[1])
    if match[2] is not None:
        denominator = float(match[2])
        value = value * 10.0 / denominator if denominator > 0 else math.nan
    if not math.isfinite(value):
        return _DEFAULT_STRENGTH
    return min(10.0, max(1.0, value))


def _claim(fields: list[str], chunk_id: str, drops: list[str]) -> ClaimMention | None:
    if len(fields) == _CLAIM_ARITY + 1 and fields[0].lower() == "claim":
        fields = fields[1:]
    if len(fields) != _CLAIM_ARITY:
        drops.append(f"claim: expected {_CLAIM_ARITY} fields, got {len(fields)}")
        return None
    subject, obj, claim_type, status, start, end, description, quotes = fields
    status = status.upper()
    if not entity_key(subject) or subject.lower() in _NONE_WORDS:
        drops.append("claim: empty subject")
        return None
    if status not in _STATUSES:
        drops.append(f"claim: status {status[:20]!r} is not TRUE, FALSE or SUSPECTED")
        return None
    return ClaimMention(
        subject=subject,
        object=None if obj.lower() in _NONE_WORDS else obj,
        claim_type=claim_type.upper(),
        status=cast(ClaimStatus, status),
        start_date=_iso_date(start),
        end_date=_iso_date(end),
        description=description,
        source_text=quotes,
        chunk_id=chunk_id,
    )


def _iso_date(text: str) -> str | None:
    if text.lower() in _NONE_WORDS:
        return None
    try:
        datetime.fromisoformat(text)
    except ValueError:
        return None
    return text


def _claim_identity(claim: ClaimMention) -> tuple[object, ...]:
    return (
        entity_key(claim.subject),
        entity_key(claim.object or ""),
        claim.claim_type,
        claim.status,
        claim.start_date,
        claim.end_date,
        claim.description,
    )
