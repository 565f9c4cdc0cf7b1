"""Every exception the project defines survives pickling: type, message and attributes.

The community job runs its work in a ``ProcessPoolExecutor`` child, and an exception raised
there reaches the parent only as a pickle. An exception whose ``__init__`` takes other
arguments than its ``args`` (``LLMError(reason, *, retryable)``) used to fail to unpickle,
which broke the pool for good. The classes are discovered by importing every module, so a new
exception class is checked without anyone listing it here.
"""

from __future__ import annotations

import importlib
import inspect
import itertools
import multiprocessing
import pickle
import pkgutil
import types
import typing
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from core.errors import KgragError, LLMError
from graph.errors import GraphError

PACKAGES = ("kgrag", "core", "graph", "streams", "agents", "query", "prompts")
_MAX_ATTEMPTS = 200  # argument combinations tried per class before giving up


def project_modules() -> list[types.ModuleType]:
    """Every module of the project's packages (``__main__`` modules would run a program)."""
    modules: list[types.ModuleType] = []
    for name in PACKAGES:
        package = importlib.import_module(name)
        modules.append(package)
        for info in pkgutil.walk_packages(package.__path__, prefix=f"{name}."):
            if info.name.rsplit(".", 1)[-1] == "__main__":
                continue
            modules.append(importlib.import_module(info.name))
    return modules


def project_exceptions() -> list[type[BaseException]]:
    found: dict[str, type[BaseException]] = {}
    for module in project_modules():
        for value in vars(module).values():
            if (
                isinstance(value, type)
                and issubclass(value, BaseException)
                and value.__module__ == module.__name__
            ):
                found[f"{value.__module__}.{value.__qualname__}"] = value
    return [found[k] for k in sorted(found)]


# ---- building an instance from the __init__ signature ----------------------------------------

_BY_TYPE: dict[Any, list[Any]] = {
    str: ["x"],
    bool: [True],
    int: [1],
    float: [1.0],
    Path: [Path("x")],
}
_ANY_VALUES: list[Any] = ["x", 1, 1.0, True, Path("x"), None, (), {}]


def _candidates(annotation: Any) -> list[Any]:
    """Values worth trying for a parameter annotated ``annotation`` (best guess first)."""
    if annotation in _BY_TYPE:
        return _BY_TYPE[annotation] + [v for v in _ANY_VALUES if v not in _BY_TYPE[annotation]]
    if isinstance(annotation, str):  # an annotation that did not resolve: match by name
        for kind, values in _BY_TYPE.items():
            if annotation.split("|")[0].strip() == kind.__name__:
                return values + _ANY_VALUES
        return list(_ANY_VALUES)
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    if args:  # X | None, unions, containers: try the members' values first
        return [v for a in args for v in _candidates(a)[:1]] + _ANY_VALUES
    return list(_ANY_VALUES)


def _parameters(cls: type[BaseException]) -> list[tuple[inspect.Parameter, list[Any]]]:
    init = cls.__init__
    try:
        hints = typing.get_type_hints(init)
    except Exception:
        hints = {}
    out = []
    for param in list(inspect.signature(init).parameters.values())[1:]:  # drop self
        if param.kind is inspect.Parameter.VAR_KEYWORD:
            continue
        annotation = hints.get(param.name, param.annotation)
        if param.kind is inspect.Parameter.VAR_POSITIONAL:
            annotation = str  # BaseException's own *args: one message
        out.append((param, _candidates(annotation)))
    return out


def build(cls: type[BaseException]) -> BaseException:
    """An instance of ``cls`` made through its real ``__init__``, so its attributes are set."""
    params = _parameters(cls)
    errors: list[str] = []
    combos = itertools.product(*(values for _, values in params))
    for values in itertools.islice(combos, _MAX_ATTEMPTS):
        positional: list[Any] = []
        keywords: dict[str, Any] = {}
        for (param, _), value in zip(params, values, strict=True):
            if param.kind is inspect.Parameter.KEYWORD_ONLY:
                keywords[param.name] = value
            else:
                positional.append(value)
        try:
            return cls(*positional, **keywords)
        except Exception as e:
            errors.append(f"{values!r}: {e!r}")
    raise AssertionError(f"cannot build {cls.__qualname__}; tried {errors[:5]}")


def assert_round_trips(exc: BaseException) -> None:
    back = pickle.loads(pickle.dumps(exc))
    assert type(back) is type(exc)
    assert str(back) == str(exc)
    assert back.args == exc.args
    assert vars(back) == vars(exc)


# ---- the tests ----------------------------------------------------------------------------

EXCEPTIONS = project_exceptions()


def test_discovery_finds_the_project_exceptions() -> None:
    names = {c.__qualname__ for c in EXCEPTIONS}
    assert {"LLMError", "KgragError", "GraphError", "PortInUseError", "ApiError"} <= names


@pytest.mark.parametrize("cls", EXCEPTIONS, ids=lambda c: f"{c.__module__}.{c.__qualname__}")
def test_every_project_exception_survives_pickling(cls: type[BaseException]) -> None:
    assert_round_trips(build(cls))


class FutureError(KgragError):
    """Stands for a subclass not written yet: keyword-only state, a message built from it."""

    def __init__(self, key: str, *, count: int, ratio: float) -> None:
        super().__init__(f"{key} failed {count} times ({ratio:.0%})")
        self.key, self.count, self.ratio = key, count, ratio


class FutureGraphError(GraphError):
    def __init__(self, *, rows: list[int]) -> None:
        super().__init__(f"{len(rows)} bad rows")
        self.rows = rows


@pytest.mark.parametrize(
    "exc",
    [FutureError("k", count=3, ratio=0.5), FutureGraphError(rows=[1, 2])],
    ids=["kgrag", "graph"],
)
def test_a_future_subclass_with_its_own_init_round_trips(exc: BaseException) -> None:
    assert_round_trips(exc)


def test_notes_and_later_attributes_survive() -> None:
    exc = LLMError("endpoint refused", retryable=False, attempts=4)
    exc.add_note("while writing the report of c-12")
    exc.community = "c-12"  # type: ignore[attr-defined]
    back = pickle.loads(pickle.dumps(exc))
    assert back.__notes__ == ["while writing the report of c-12"]
    assert (back.retryable, back.attempts, back.community) == (False, 4, "c-12")


def _raise_llm_error() -> None:
    raise LLMError("report rejected", retryable=False, attempts=2)


def test_an_error_raised_in_a_spawned_pool_reaches_the_parent_intact() -> None:
    """What the community job does: the child's exception is re-raised in the parent, and the
    pool stays usable for the next run."""
    with ProcessPoolExecutor(
        max_workers=1, mp_context=multiprocessing.get_context("spawn")
    ) as pool:
        with pytest.raises(LLMError) as caught:
            pool.submit(_raise_llm_error).result(timeout=60)
        assert (caught.value.retryable, caught.value.attempts) == (False, 2)
        assert str(caught.value) == "report rejected"
        assert pool.submit(sum, [1, 2]).result(timeout=60) == 3
