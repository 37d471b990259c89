"""Who asks and what they may see: roles, scopes, the principal and access records.

Pure value types and rules (no SQL: ``store.queries`` turns ``may_see_model`` into its
condition); ``store.accounts`` issues and checks the credentials that produce a
``Principal``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from configs.vocabulary.scopes import (
    ADMIN_SCOPE,
    DEFAULT_TOKEN_SCOPES,
    READ,
    SCOPES,
    SUBMIT,
    TOKENS,
)

__all__ = ["ADMIN_SCOPE", "DEFAULT_TOKEN_SCOPES", "READ", "SCOPES", "SUBMIT", "TOKENS"]

ADMIN, RESEARCHER = "admin", "researcher"
AUTHOR = "author"  # a researcher an operator has granted task creation
ROLES = (ADMIN, AUTHOR, RESEARCHER)
ROLE_SCOPES = {
    ADMIN: frozenset(SCOPES),
    AUTHOR: frozenset({READ, SUBMIT, TOKENS}),
    RESEARCHER: frozenset({READ, SUBMIT, TOKENS}),
}


@dataclass(frozen=True)
class Principal:
    """Who asks: their role, the scopes of the credential used and the tasks they own."""

    user_id: str | None
    name: str
    role: str | None
    scopes: frozenset[str] = frozenset()
    via: str = "anonymous"  # "token", "session" or "anonymous"
    owned_tasks: frozenset[str] = field(default_factory=frozenset)
    token_id: str | None = None

    @property
    def authenticated(self) -> bool:
        return self.user_id is not None

    @property
    def is_admin(self) -> bool:
        return self.role == ADMIN and ADMIN_SCOPE in self.scopes

    @property
    def may_create_tasks(self) -> bool:
        """Admins, and authors with a credential that may write."""
        return self.is_admin or (self.role == AUTHOR and SUBMIT in self.scopes)

    def may_see_task(self, task: TaskAccess) -> bool:
        """Public tasks are everyone's; a private one only its owner's and the admins'."""
        return not task.private or self.is_admin or task.name in self.owned_tasks

    def may_see_model(self, task: str, owner_id: str | None) -> bool:
        """A submission is its submitter's, its task owner's and the admins'."""
        if self.is_admin:
            return True
        if self.user_id is None or READ not in self.scopes:
            return False
        return owner_id == self.user_id or task in self.owned_tasks

    def may_read_model(self, model: ModelAccess) -> bool:
        """A model's page and full scores: those who may see the submission, and everyone
        once it is published (a private task's visibility is the caller's own check)."""
        return model.published or self.may_see_model(model.task, model.owner_id)

    def may_publish(self, model: ModelAccess) -> bool:
        """Publishing is the submitter's decision (an admin may make it for them)."""
        return self.is_admin or (self.user_id is not None and model.owner_id == self.user_id)


ANONYMOUS = Principal(user_id=None, name="anonymous", role=None)


@dataclass(frozen=True)
class TaskAccess:
    """A task's owner and privacy flag."""

    name: str
    owner_id: str | None = None
    private: bool = False


@dataclass(frozen=True)
class ModelAccess:
    """Who a submission belongs to and whether its submitter published it."""

    model_id: str
    task: str
    owner_id: str | None
    published: bool = False
