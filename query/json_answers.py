"""Reading the JSON objects the map, rating and DRIFT prompts ask for, as forgivingly as is
safe.

Models wrap JSON in code fences, add a sentence before it, write scores as "80", 80.0 or
"80/100", or go over the range. All of that is accepted and clamped; text with no JSON object
in it, or an object without the expected fields, raises ``MalformedAnswerError`` so the
caller can ask once more.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

from query.errors import QueryError

_FENCE = re.compile(r"^```[a-zA-Z]*\s*|\s*```\s*$")
_NUMBER = re.compile(r"^\s*(-?\d+(?:\.\d+)?)\s*(?:%|/\s*\d+)?\s*$")


class MalformedAnswerError(QueryError, ValueError):
    """The model's answer is not the JSON the prompt asked for."""


def load_object(text: str) -> Any:
    """The first JSON value in ``text``: the whole text, else its outermost ``{…}``."""
    body = _FENCE.sub("", text.strip())
    try:
        return json.loads(body)
    except ValueError:
        pass
    start, end = body.find("{"), body.rfind("}")
    if start < 0 or end <= start:
        raise MalformedAnswerError(f"no JSON object in the answer: {text[:80]!r}")
    try:
        return json.loads(body[start : end + 1])
    except ValueError as e:
        raise MalformedAnswerError(f"unreadable JSON in the answer: {text[:80]!r}") from e


def clamp_score(value: object, high: int) -> int:
    """An integer score in 0..high; anything that is not a number counts as 0."""
    number: float | None = None
    if isinstance(value, bool):
        number = None
    elif isinstance(value, int | float):
        number = float(value)
    elif isinstance(value, str):
        m = _NUMBER.match(value)
        number = float(m.group(1)) if m else None
    if number is None or not math.isfinite(number):
        return 0
    return max(0, min(high, round(number)))


def parse_map_points(text: str) -> list[tuple[str, int]]:
    """``{"points": [{"description", "score"}]}`` as (description, score 0..100) pairs.
    A bare list of points, or one point object, is accepted too; points without a
    description are dropped."""
    data = load_object(text)
    if isinstance(data, dict) and "points" in data:
        data = data["points"]
    elif isinstance(data, dict) and "description" in data:
        data = [data]
    if not isinstance(data, list):
        raise MalformedAnswerError("the answer has no list of points")
    points = []
    for item in data:
        if not isinstance(item, dict):
            continue
        description = str(item.get("description") or "").strip()
        if description:
            points.append((description, clamp_score(item.get("score"), 100)))
    return points


def parse_rating(text: str) -> int:
    """``{"rating": 0..5}`` as an integer 0..5."""
    data = load_object(text)
    if not isinstance(data, dict) or "rating" not in data:
        raise MalformedAnswerError("the answer has no rating")
    return clamp_score(data["rating"], 5)


def parse_drift_step(text: str, answer_key: str) -> tuple[str, int, list[str]]:
    """A DRIFT answer, ``{<answer_key>, "score", "follow_up_queries"}``: the answer text, its
    score 0..100 and the follow-up questions (blank ones dropped, a single string accepted
    as one question). An answer without its text is malformed."""
    data = load_object(text)
    if not isinstance(data, dict):
        raise MalformedAnswerError(f"the answer is not an object with {answer_key!r}")
    answer = str(data.get(answer_key) or "").strip()
    if not answer:
        raise MalformedAnswerError(f"the answer has no {answer_key!r}")
    raw = data.get("follow_up_queries") or []
    if isinstance(raw, str):
        raw = [raw]
    queries = (
        [q.strip() for q in raw if isinstance(q, str) and q.strip()]
        if isinstance(raw, list)
        else []
    )
    return answer, clamp_score(data.get("score"), 100), queries
