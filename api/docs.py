"""OpenAPI documentation helpers shared by the blueprints: each blueprint has its own table
of what its error statuses mean, and documents responses the same way."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from api.bodies import Blueprint
from api.schemas import ErrorSchema

F = TypeVar("F", bound=Callable[..., Any])


def error_docs(blp: Blueprint, descriptions: Mapping[int, str]) -> Callable[..., Callable[[F], F]]:
    """The ``errors(*statuses)`` decorator of ``blp``: each status documented with the Error
    schema and the blueprint's sentence for it."""

    def errors(*statuses: int) -> Callable[[F], F]:
        def decorate(func: F) -> F:
            for status in statuses:
                document = blp.alt_response(
                    status, schema=ErrorSchema, description=descriptions[status]
                )
                func = document(func)
            return func

        return decorate

    return errors


def success_docs(blp: Blueprint) -> Callable[..., Callable[[F], F]]:
    """The ``ok(schema, status)`` decorator of ``blp``: documents the success body without
    re-serialising what the view returns."""

    def ok(schema: type, status: int = 200) -> Callable[[F], F]:
        decorate: Callable[[F], F] = blp.alt_response(status, schema=schema, success=True)
        return decorate

    return ok
