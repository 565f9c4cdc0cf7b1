"""Typed errors. Each says what was wrong and, where it can, what to do about it."""

from __future__ import annotations

from graph.errors import PicklableError


class KgragError(PicklableError):
    """Base of every error this project raises on purpose.

    It pickles by state (see ``PicklableError``), so a subclass may take whatever ``__init__``
    arguments it needs and still cross from a pool child to its parent intact.
    """


class ConfigError(KgragError):
    """A setting has a value the system cannot run with."""


class ServiceError(KgragError):
    """A local service (Kafka, Weaviate) could not be prepared, started or reached."""


class MissingToolError(ServiceError):
    """A program the launcher needs (java, mvn, go) is not installed."""

    def __init__(self, tool: str, hint: str) -> None:
        super().__init__(f"'{tool}' is not on PATH: {hint}")
        self.tool = tool


class PortInUseError(ServiceError):
    """A port the launcher wants is taken by another process."""

    def __init__(self, port: int, service: str, setting: str) -> None:
        super().__init__(
            f"port {port} needed by {service} is already in use by another process; "
            f"stop that process or move {service} with {setting}"
        )
        self.port = port


class LLMError(KgragError):
    """The endpoint gave no usable answer. ``retryable`` says whether trying again later may
    succeed (rate limits, outages) or not (bad request, auth, wrong model)."""

    def __init__(self, reason: str, *, retryable: bool, attempts: int = 1) -> None:
        super().__init__(reason)
        self.reason = reason
        self.retryable = retryable
        self.attempts = attempts
