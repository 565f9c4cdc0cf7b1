"""Extract one chunk with an LLM: GraphRAG's gleaning conversation, then optional claims.

The conversation, all in one message list so every turn sees the earlier answers:

1. user: the extraction prompt around the chunk text, sanitised so that text imitating the
   delimiters cannot become records (:func:`graph.extraction.parsing.sanitize_input_text`);
   assistant: the first answer.
2. up to ``max_gleanings`` times: user: "many entities were missed, add them"; assistant: more
   records. Between two gleanings, user: "are entities still missing? YES or NO"; the reply is
   kept in the conversation and the loop stops unless it starts with Y.

All answers are parsed together, so a relationship in a gleaning may name an entity from the
first answer. An answer with no valid record, no completion delimiter and some text is garbage
(an empty answer is "nothing found"). A garbage first answer is asked again, up to
``attempts`` times in all (``extraction.parse_attempts``), with purpose ``extract_graph:retry``
and — when the LLM can — after forgetting the cached garbage; if every answer is garbage,
:class:`ExtractionFailedError` is raised and the caller records the chunk as failed rather than
merging part of it. A garbage gleaning answer is asked again the same way (a model that
garbles one answer in twenty must not lose a chunk's gleaned records to it: the result would
then depend on luck, not on the text); if it stays garbage the gleaning counts as "nothing
more" (a model may answer a gleaning in prose). Claims (GraphRAG's covariates) are one separate
turn with the first answer's rule. Errors the LLM raises itself (it retries transient ones)
propagate as they are.

The result carries the tokens the conversation spent (:class:`TokenMeter`): every answer that
reached the model counts, retries of garbage included; an answer the LLM served without asking
the model (``ChatResult.cached``: its response cache, or an identical request in flight) counts
0, so a replayed chunk costs what replaying it cost.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from graph.errors import GraphError
from graph.extraction.parsing import (
    ParsedClaims,
    parse_claims_output,
    parse_graph_output,
    parse_graph_outputs,
    sanitize_input_text,
)
from graph.model import Chunk, ChunkExtraction
from graph.protocols import LLM, ChatResult

log = logging.getLogger(__name__)

PURPOSE_EXTRACT = "extract_graph"
PURPOSE_EXTRACT_RETRY = "extract_graph:retry"
PURPOSE_CONTINUE = "glean_continue"
PURPOSE_CONTINUE_RETRY = "glean_continue:retry"
DEFAULT_ATTEMPTS = 5
PURPOSE_LOOP = "glean_loop"
PURPOSE_CLAIMS = "extract_claims"
PURPOSE_CLAIMS_RETRY = "extract_claims:retry"

Message = dict[str, str]


class ExtractionFailedError(GraphError):
    """The LLM's answer for a chunk did not parse, even after the retries."""

    def __init__(self, chunk_id: str, reason: str) -> None:
        super().__init__(f"extraction of {chunk_id} failed: {reason}")
        self.chunk_id = chunk_id
        self.reason = reason


class GraphPrompt(Protocol):
    """Renders the first-turn extraction prompt (entity types already bound)."""

    def __call__(self, *, input_text: str) -> str: ...


class ClaimsPrompt(Protocol):
    """Renders the claims prompt, e.g. ``partial(prompts.render_extract_claims, lib)``."""

    def __call__(self, *, entity_specs: str, claim_description: str, input_text: str) -> str: ...


@dataclass(frozen=True, slots=True)
class ExtractionPrompts:
    """Rendered prompts and renderers, built by the caller from ``prompts/`` so this module
    needs no file access: ``extract_graph=partial(render_extract_graph, lib,
    entity_types=types)``, ``glean_continue=render_glean_continue(lib)``, …"""

    extract_graph: GraphPrompt
    glean_continue: str
    glean_loop: str
    extract_claims: ClaimsPrompt


@dataclass(frozen=True, slots=True)
class ClaimSpec:
    """What claims to look for: the entities (names or types) and the kind of claim."""

    entity_specs: str
    claim_description: str


@runtime_checkable
class ForgettingLLM(Protocol):
    """An LLM with a response cache that can drop one answer (``core.llm.ChatLLM``)."""

    async def forget(
        self,
        messages: Sequence[Message],
        *,
        json_mode: bool = False,
        max_tokens: int | None = None,
    ) -> bool: ...


class TokenMeter:
    """An ``LLM`` that passes every call on and adds up the tokens its answers spent (an
    answer marked ``cached`` spent none); ``forget`` is passed on when the LLM can forget."""

    def __init__(self, llm: LLM) -> None:
        self.llm = llm
        self.prompt_tokens = 0
        self.completion_tokens = 0

    async def chat(
        self,
        messages: Sequence[Message],
        *,
        json_mode: bool = False,
        max_tokens: int | None = None,
        purpose: str = "chat",
    ) -> ChatResult:
        result = await self.llm.chat(
            messages, json_mode=json_mode, max_tokens=max_tokens, purpose=purpose
        )
        if not result.cached:
            self.prompt_tokens += result.prompt_tokens
            self.completion_tokens += result.completion_tokens
        return result

    async def forget(
        self,
        messages: Sequence[Message],
        *,
        json_mode: bool = False,
        max_tokens: int | None = None,
    ) -> bool:
        if not isinstance(self.llm, ForgettingLLM):
            return False
        return await self.llm.forget(messages, json_mode=json_mode, max_tokens=max_tokens)


async def extract_chunk(
    chunk: Chunk,
    llm: LLM,
    prompts: ExtractionPrompts,
    *,
    max_gleanings: int,
    claims: ClaimSpec | None,
    attempts: int = DEFAULT_ATTEMPTS,
) -> ChunkExtraction:
    """Entities, relationships and (with a ``ClaimSpec``) claims of one chunk, all or nothing;
    each turn asked at most ``attempts`` times while its answer is garbage."""
    if attempts < 1:
        raise ValueError(f"attempts must be at least 1, got {attempts}")
    # every call below goes through one meter: the caller's, when it keeps one (to count a
    # failed extraction's calls too), else a new one
    meter = llm if isinstance(llm, TokenMeter) else TokenMeter(llm)
    text = sanitize_input_text(chunk.text)
    answers = await _gleaning_conversation(chunk.id, meter, prompts, text, max_gleanings, attempts)
    graph = parse_graph_outputs(answers, chunk.id)
    found = (
        ParsedClaims((), 0, ())
        if claims is None
        else await _claims(chunk.id, meter, prompts, claims, text, attempts)
    )
    if graph.dropped or found.dropped:
        log.debug("chunk %s: dropped %s", chunk.id, graph.drop_reasons + found.drop_reasons)
    return ChunkExtraction(
        chunk=chunk,
        entities=graph.entities,
        relationships=graph.relationships,
        claims=found.claims,
        mode="llm",
        dropped_records=graph.dropped + found.dropped,
        prompt_tokens=meter.prompt_tokens,
        completion_tokens=meter.completion_tokens,
    )


async def _gleaning_conversation(
    chunk_id: str,
    llm: LLM,
    prompts: ExtractionPrompts,
    text: str,
    max_gleanings: int,
    attempts: int,
) -> list[str]:
    """The answers of the first turn and of each gleaning, in order."""
    messages = [_user(prompts.extract_graph(input_text=text))]
    first = await _ask_until_parsed(
        chunk_id, llm, messages, (PURPOSE_EXTRACT, PURPOSE_EXTRACT_RETRY), _graph_problem, attempts
    )
    messages.append(_assistant(first))
    answers = [first]
    for round_no in range(1, max_gleanings + 1):
        messages.append(_user(prompts.glean_continue))
        try:
            more = await _ask_until_parsed(
                chunk_id,
                llm,
                messages,
                (PURPOSE_CONTINUE, PURPOSE_CONTINUE_RETRY),
                _graph_problem,
                attempts,
            )
        except ExtractionFailedError as e:
            log.warning("chunk %s: gleaning %d taken as nothing more: %s", chunk_id, round_no, e)
            more = ""
        messages.append(_assistant(more))
        answers.append(more)
        if round_no == max_gleanings:
            break
        messages.append(_user(prompts.glean_loop))
        if not wants_more(await _say(llm, messages, PURPOSE_LOOP)):
            break
    return answers


async def _claims(
    chunk_id: str, llm: LLM, prompts: ExtractionPrompts, spec: ClaimSpec, text: str, attempts: int
) -> ParsedClaims:
    prompt = prompts.extract_claims(
        entity_specs=spec.entity_specs, claim_description=spec.claim_description, input_text=text
    )
    answer = await _ask_until_parsed(
        chunk_id,
        llm,
        [_user(prompt)],
        (PURPOSE_CLAIMS, PURPOSE_CLAIMS_RETRY),
        _claims_problem,
        attempts,
    )
    return parse_claims_output(answer, chunk_id)


async def _say(llm: LLM, messages: list[Message], purpose: str) -> str:
    """Ask with the conversation so far and append the reply to it."""
    reply = (await llm.chat(tuple(messages), purpose=purpose)).text
    messages.append(_assistant(reply))
    return reply


async def _ask_until_parsed(
    chunk_id: str,
    llm: LLM,
    messages: list[Message],
    purposes: tuple[str, str],
    problem: Callable[[str], str | None],
    attempts: int,
) -> str:
    """The first answer that is not garbage, asking at most ``attempts`` times (the first with
    ``purposes[0]``, the others with ``purposes[1]``)."""
    reason = ""
    for attempt in range(attempts):
        purpose = purposes[min(attempt, 1)]
        reply = (await llm.chat(tuple(messages), purpose=purpose)).text
        found = problem(reply)
        if found is None:
            return reply
        reason = found
        if isinstance(llm, ForgettingLLM):
            await llm.forget(tuple(messages))  # so that asking again reaches the model
    raise ExtractionFailedError(
        chunk_id, f"{purposes[0]} answer did not parse in {attempts} attempt(s): {reason}"
    )


def _graph_problem(answer: str) -> str | None:
    parsed = parse_graph_output(answer, "")
    if parsed.entities or parsed.complete or not answer.strip():
        return None
    return parsed.drop_reasons[0] if parsed.drop_reasons else "no records"


def _claims_problem(answer: str) -> str | None:
    parsed = parse_claims_output(answer, "")
    if parsed.claims or parsed.complete or not answer.strip():
        return None
    return parsed.drop_reasons[0] if parsed.drop_reasons else "no records"


def wants_more(reply: str) -> bool:
    """The YES/NO loop answer: only a reply starting with Y (after quotes or markup) continues."""
    return reply.strip().lstrip("\"'*`").upper().startswith("Y")


def _user(content: str) -> Message:
    return {"role": "user", "content": content}


def _assistant(content: str) -> Message:
    return {"role": "assistant", "content": content}
