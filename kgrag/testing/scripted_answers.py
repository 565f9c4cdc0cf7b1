"""What the scripted test model answers: the dispatch from a request to its kind's answer.

Pure functions (no I/O) used by ``kgrag.testing.scripted_llm``. Requests are recognised by the
first line of each prompt, ``TASK: ...`` (``prompts.TASK_MARKERS``): :func:`classify` names the
kind, :func:`answer` derives its answer from the input (extraction answers in
``kgrag.testing.scripted_extraction``, context answers in ``kgrag.testing.scripted_contexts``);
a request a strict model would refuse raises ``RequestRejected``. Answers are cheap and
deterministic: capitalised phrases become typed entities, entities of one sentence are related,
reports and answers cite only ids present in their input, map scores follow the word overlap
with the question. :func:`malform` and :func:`truncate` spoil an answer on demand, and
:func:`embed_text` gives the embeddings.
"""

from __future__ import annotations

import hashlib
import math
from typing import Any

from kgrag.testing.scripted_contexts import (
    answer_confirm_alias,
    answer_drift_local,
    answer_drift_primer,
    answer_drift_reduce,
    answer_graphrag_search,
    answer_map,
    answer_questions,
    answer_rating,
    answer_reduce,
    answer_report,
    answer_reports,
    answer_search,
    check_query_prompt,
    is_graphrag_search,
)
from kgrag.testing.scripted_extraction import (
    COMPLETE,
    TUPLE,
    answer_claims,
    answer_extraction,
    answer_glean_continue,
    answer_glean_loop,
    answer_summary,
)
from kgrag.testing.scripted_text import WORD_RE, RequestRejected, content_text
from prompts import TASK_MARKERS

# request kind -> marker; kinds are the prompt names without the "_system" suffix
KINDS: dict[str, str] = {name.removesuffix("_system"): m for name, m in TASK_MARKERS.items()}
_SYSTEM_KINDS = {
    "local_search",
    "basic_search",
    "global_map",
    "global_reduce",
    "drift_primer",
    "drift_local",
    "drift_reduce",
}


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
            if is_graphrag_search(text):
                return "graphrag_search"
    return "unknown"


def answer(kind: str, messages: list[dict[str, Any]], json_mode: bool | None = None) -> str:
    """The scripted model: a well-formed answer derived from the request, or RequestRejected
    (also for a request of no kind it knows: a prompt without its ``TASK:`` line).
    ``json_mode``: whether the request asked for a JSON answer (None: not known)."""
    users = [content_text(m) for m in messages if m.get("role") == "user"]
    system = "\n".join(
        content_text(m) for m in messages if m.get("role") in ("system", "developer")
    )
    last = users[-1] if users else ""
    check_query_prompt(
        kind, last if kind in ("question_generation", "community_rating") else system, json_mode
    )
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
        case "confirm_alias":
            return answer_confirm_alias(last)
        case "drift_primer":
            return answer_drift_primer(system, last)
        case "drift_local":
            return answer_drift_local(system, last)
        case "drift_reduce":
            return answer_drift_reduce(system)
        case "graphrag_search":
            return answer_graphrag_search(system, last)
    first = (system or last).strip().splitlines()[:1]
    raise RequestRejected(
        f"no TASK: line this model knows starts the prompt (it starts {first[0][:60]!r})"
        if first
        else "the request has no prompt"
    )


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
    for w in WORD_RE.findall(text.lower()) or [""]:
        h = hashlib.blake2b(w.encode(), digest_size=8).digest()
        idx = int.from_bytes(h[:4], "little") % dim
        vec[idx] += 1.0 if h[4] & 1 else -1.0
    norm = math.sqrt(sum(v * v for v in vec)) or 1.0
    if norm == 1.0 and not any(vec):
        vec[0] = 1.0
    return [v / norm for v in vec]
