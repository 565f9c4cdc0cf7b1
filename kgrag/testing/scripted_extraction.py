"""Extraction answers of the scripted test model: entities, relationships, gleaning, claims and
description summaries, derived from the chunk text of the prompt.

Pure functions (no I/O) used by the dispatch in ``kgrag.testing.scripted_answers``. Capitalised
phrases become typed entities, entities of one sentence are related, the first extraction holds
back a quarter of the entities for gleaning and the YES/NO loop says YES while some are still
missing. An extraction prompt without its entity types, delimiters, worked examples or chunk
text, or a gleaning turn without the earlier answer, raises :class:`RequestRejected`.
"""

from __future__ import annotations

import itertools
import re
from collections import Counter
from dataclasses import dataclass
from typing import Any

from kgrag.testing.scripted_text import (
    RequestRejected,
    clip,
    content_text,
    entity_type,
    last_labelled,
    phrases,
    sentences,
    words,
)
from prompts import TASK_MARKERS

TUPLE, RECORD, COMPLETE = "<|>", "##", "<|COMPLETE|>"


@dataclass
class Entity:
    name: str
    type: str
    description: str
    sentence: int


def derive_entities(text: str, types: list[str]) -> list[Entity]:
    """Capitalised phrases (minus sentence-initial function words), typed by simple rules,
    kept when their type was asked for; in order of first appearance."""
    wanted = {t.strip().lower() for t in types}
    found: dict[str, Entity] = {}
    for i, sent in enumerate(sentences(text)):
        for phrase, at in phrases(sent):
            if phrase.upper() in found:
                continue
            etype = entity_type(phrase, sent[:at])
            if etype in wanted:
                desc = f"{phrase} is mentioned in the article: {clip(sent)}"
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
        (a, b, f"{a} and {b} appear together: {clip(first[(a, b)])}", min(10, 3 + n))
        for (a, b), n in counts.items()
    ]


def format_records(ents: list[Entity], rels: list[tuple[str, str, str, int]]) -> str:
    records = [f'("entity"{TUPLE}{e.name}{TUPLE}{e.type}{TUPLE}{e.description})' for e in ents]
    records += [f'("relationship"{TUPLE}{a}{TUPLE}{b}{TUPLE}{d}{TUPLE}{s})' for a, b, d, s in rels]
    return f"\n{RECORD}\n".join(records) + f"\n{COMPLETE}"


def parse_extraction_prompt(prompt: str) -> tuple[list[str], str]:
    """Entity types and chunk text of an extraction prompt, or RequestRejected saying what
    is missing."""
    types_at = last_labelled(prompt, "Entity types:")
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
    if first_user is None or not content_text(first_user).startswith(TASK_MARKERS["extract_graph"]):
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
    spec = last_labelled(prompt, "Entity specification:")
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
                    f"Sentence {i + 1} states: {clip(sent)}",
                    clip(sent, 160),
                ]
            )
        )
    return f"\n{RECORD}\n".join(f"({r})" for r in records) + f"\n{COMPLETE}"


def answer_summary(prompt: str) -> str:
    """Distinct description sentences, the most representative (shared words) first."""
    name = last_labelled(prompt, "Entity:")
    listed = re.findall(r"^- (.+)$", prompt.split("Descriptions:")[-1], re.M)
    if name is None or not listed:
        raise RequestRejected("summary prompt lacks the entity or its descriptions")
    sents = list(dict.fromkeys(s for d in listed for s in sentences(d)))
    bag = Counter(w for s in sents for w in words(s))
    ranked = sorted(sents, key=lambda s: -sum(bag[w] for w in words(s)) / (1 + len(words(s))))
    return f"{name[1]}: " + " ".join(ranked)
