"""Accounts: users and roles, API tokens and login sessions, task ownership and privacy.

Passwords are stored as argon2 hashes; token and session secrets as the sha256 of a
256-bit random secret (a secret that long needs no slow hash), so a leaked database
leaks no usable credential. Expiry is read from the injected clock."""

from __future__ import annotations

import functools
import hashlib
import re
import secrets
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TypedDict

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError
from sqlalchemy import func, select, update
from sqlalchemy.orm import Session

from configs.vocabulary.clock import SYSTEM_CLOCK, Clock
from store.db import Database
from store.leases import updated
from store.models import ModelRow, TaskRow, TokenRow, UserRow
from store.rules.principals import (
    ADMIN,
    ROLE_SCOPES,
    ROLES,
    SCOPES,
    ModelAccess,
    Principal,
    TaskAccess,
)

API, SESSION = "api", "session"
TOKEN_PREFIX = "dyn_"
NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.@-]{0,63}$")
_HASHER = PasswordHasher()


@functools.cache
def _dummy_hash() -> str:
    """Verified against when a user does not exist, so a login takes as long either way
    (made on first use: hashing at import would slow every CLI start)."""
    return _HASHER.hash(secrets.token_urlsafe(16))


class AccountError(ValueError):
    """Bad account input (a taken name, an unknown role or scope): a 4xx for the caller."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code, self.message = code, message


class AuthFailure(Exception):
    """Credentials that do not authenticate: ``unauthenticated``, ``token_expired`` or
    ``token_revoked``, with a sentence."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code, self.message = code, message


class UserInfo(TypedDict):
    """A user as the API lists them (never their password hash)."""

    id: str
    name: str
    role: str
    has_password: bool
    created_at: str | None


class TokenInfo(TypedDict):
    """A token as its owner lists it (never its secret or hash): ``state`` is ``active``,
    ``revoked`` or ``expired``; times are ISO 8601 UTC."""

    id: str
    name: str
    prefix: str
    scopes: list[str]
    state: str
    created_at: str | None
    expires_at: str | None
    revoked_at: str | None
    last_used_at: str | None


@dataclass(frozen=True)
class IssuedToken:
    """A new token: the secret (shown once) and its listing."""

    secret: str
    info: TokenInfo


def hash_secret(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def csrf_token(session_secret: str) -> str:
    """The CSRF token of a session: derived from its secret, which only the browser has."""
    return hashlib.sha256(b"csrf:" + session_secret.encode()).hexdigest()


def parse_scopes(scopes: list[str] | tuple[str, ...], role: str) -> frozenset[str]:
    """The scopes asked for, each known and within what the role allows."""
    chosen = frozenset(scopes)
    unknown = chosen - set(SCOPES)
    if unknown or not chosen:
        raise AccountError(
            "invalid_scopes", f"scopes must be a non-empty subset of {', '.join(SCOPES)}"
        )
    beyond = chosen - ROLE_SCOPES[role]
    if beyond:
        raise AccountError(
            "scope_not_allowed",
            f"{'an' if role[:1] in 'aeiou' else 'a'} {role} cannot hold scope(s) "
            f"{', '.join(sorted(beyond))}",
        )
    return chosen


class Accounts:
    """Account operations over a Database."""

    def __init__(self, db: Database, clock: Clock = SYSTEM_CLOCK) -> None:
        self.db = db
        self.clock = clock

    # -- users -------------------------------------------------------------------------------
    def add_user(self, name: str, role: str, password: str | None = None) -> UserInfo:
        """A new user; ``password`` (if any) is stored as an argon2 hash."""
        if not NAME.match(name):
            raise AccountError(
                "invalid_name", f"a user name is 1-64 of A-Z a-z 0-9 _ . @ -, not {name!r}"
            )
        if role not in ROLES:
            raise AccountError("invalid_role", f"role must be one of {', '.join(ROLES)}")
        if password is not None and len(password) < 8:
            raise AccountError("weak_password", "a password needs at least 8 characters")
        with self.db.session() as session, session.begin():
            if session.scalars(select(UserRow).where(UserRow.name == name)).first():
                raise AccountError("user_exists", f"there is already a user {name!r}")
            user = UserRow(
                id=str(uuid.uuid4()),
                name=name,
                role=role,
                password_hash=_HASHER.hash(password) if password is not None else None,
                created_at=self.clock.now(),
            )
            session.add(user)
        return _user_dict(user)

    def set_role(self, name: str, role: str) -> UserInfo:
        """``name``'s new role. Tokens keep their scopes, but a request is only ever allowed
        those the role holds at that moment, so a demotion takes effect at the next request.
        The last admin stays one (no one could manage accounts through the API after)."""
        if role not in ROLES:
            raise AccountError("invalid_role", f"role must be one of {', '.join(ROLES)}")
        with self.db.session() as session, session.begin():
            # PostgreSQL: two demotions at once wait for each other here, and the second
            # then counts the admins the first left (SQLite ignores the lock; its single
            # UPDATE below is atomic under its one writer lock)
            session.execute(select(UserRow.id).where(UserRow.role == ADMIN).with_for_update())
            admins = (
                select(func.count()).select_from(UserRow).where(UserRow.role == ADMIN)
            ).scalar_subquery()
            change = update(UserRow).where(UserRow.name == name).values(role=role)
            if role != ADMIN:  # the check and the write in one statement: no race between
                change = change.where((UserRow.role != ADMIN) | (admins > 1))
            if updated(session, change) == 1:
                user = session.scalars(select(UserRow).where(UserRow.name == name)).one()
                return _user_dict(user)
            if session.scalars(select(UserRow).where(UserRow.name == name)).first() is None:
                raise AccountError("unknown_user", f"there is no user {name!r}")
            raise AccountError(
                "last_admin", f"{name!r} is the last admin: make another admin first"
            )

    def users(self) -> list[UserInfo]:
        with self.db.session() as session:
            return [_user_dict(u) for u in session.scalars(select(UserRow).order_by(UserRow.name))]

    def user_by_name(self, name: str) -> UserInfo | None:
        with self.db.session() as session:
            user = session.scalars(select(UserRow).where(UserRow.name == name)).first()
            return _user_dict(user) if user else None

    def check_password(self, name: str, password: str) -> str | None:
        """The user's id when ``password`` is theirs, else None (same work either way)."""
        with self.db.session() as session:
            user = session.scalars(select(UserRow).where(UserRow.name == name)).first()
        stored = user.password_hash if user and user.password_hash else _dummy_hash()
        try:
            _HASHER.verify(stored, password)
        except (VerificationError, InvalidHashError):
            return None
        return user.id if user is not None and user.password_hash else None

    # -- tokens and sessions -----------------------------------------------------------------
    def create_token(
        self,
        user_id: str,
        name: str,
        scopes: list[str] | tuple[str, ...],
        *,
        expires_at: datetime | None = None,
        kind: str = API,
    ) -> IssuedToken:
        """A new token for ``user_id``; the secret is returned here and never again."""
        with self.db.session() as session, session.begin():
            user = session.get(UserRow, user_id)
            if user is None:
                raise AccountError("unknown_user", f"no user {user_id!r}")
            chosen = parse_scopes(scopes, user.role)
            if expires_at is not None and expires_at <= self.clock.now():
                raise AccountError("invalid_expiry", "a token must expire in the future")
            secret, row = _new_token(user_id, kind, name, chosen, expires_at, self.clock.now())
            session.add(row)
        return IssuedToken(secret, _token_dict(row))

    def tokens(self, user_id: str) -> list[TokenInfo]:
        """The user's API tokens (revoked and expired ones too, marked), newest first."""
        with self.db.session() as session:
            rows = session.scalars(
                select(TokenRow)
                .where(TokenRow.user_id == user_id, TokenRow.kind == API)
                .order_by(TokenRow.created_at.desc())
            )
            return [_token_dict(row, self.clock.now()) for row in rows]

    def revoke_token(
        self,
        user_id: str,
        token_id: str,
        kind: str = API,
        within: frozenset[str] | None = None,
    ) -> TokenInfo | None:
        """Revoke one of the user's tokens; None when they have no such token. ``within``
        is what the asking credential holds: a weaker token may not revoke a stronger one
        (``scope_not_allowed``), so it cannot lock its owner out of their admin token."""
        with self.db.session() as session, session.begin():
            row = _owned_token(session, user_id, token_id, kind)
            if row is None:
                return None
            _check_within(row, within, "revoke")
            if row.revoked_at is None:
                row.revoked_at = self.clock.now()
            return _token_dict(row, self.clock.now())

    def rotate_token(
        self, user_id: str, token_id: str, within: frozenset[str] | None = None
    ) -> IssuedToken | None:
        """Revoke a live token and issue its replacement (same name, scopes and lifetime).
        ``within`` is what the asking credential holds: a token with more is refused
        (``scope_not_allowed``), since rotating hands its scopes out again."""
        now = self.clock.now()
        with self.db.session() as session, session.begin():
            old = _owned_token(session, user_id, token_id, API)
            if old is None:
                return None
            _check_within(old, within, "rotate")
            if old.revoked_at is not None:
                raise AccountError("token_revoked", "a revoked token cannot be rotated")
            expires_at = None
            if old.expires_at is not None:
                if old.expires_at <= now:
                    raise AccountError("token_expired", "an expired token cannot be rotated")
                expires_at = now + (old.expires_at - old.created_at)
            old.revoked_at = now
            secret, row = _new_token(
                user_id, API, old.name, frozenset(old.scopes.split()), expires_at, now
            )
            session.add(row)
        return IssuedToken(secret, _token_dict(row))

    def authenticate(self, secret: str, kind: str = API) -> Principal:
        """The principal a token (or session) secret stands for; AuthFailure otherwise."""
        now = self.clock.now()
        with self.db.session() as session, session.begin():
            row = session.scalars(
                select(TokenRow).where(TokenRow.secret_hash == hash_secret(secret))
            ).first()
            if row is None or row.kind != kind:
                raise AuthFailure("unauthenticated", "the credentials are not valid")
            if row.revoked_at is not None:
                raise AuthFailure(
                    "token_revoked", f"the token {row.prefix}… was revoked; create a new one"
                )
            if row.expires_at is not None and row.expires_at <= now:
                raise AuthFailure(
                    "token_expired",
                    f"the token {row.prefix}… expired at {row.expires_at.isoformat()}Z",
                )
            # Once a minute is enough to tell live tokens from dead ones, and spares the
            # database a write on every request.
            if row.last_used_at is None or now - row.last_used_at > timedelta(minutes=1):
                row.last_used_at = now
            user = session.get(UserRow, row.user_id)
            assert user is not None  # the foreign key guarantees it
            return Principal(
                user_id=user.id,
                name=user.name,
                role=user.role,
                scopes=frozenset(row.scopes.split()) & ROLE_SCOPES[user.role],
                via="session" if kind == SESSION else "token",
                owned_tasks=_owned_tasks(session, user.id),
                token_id=row.id,
            )

    # -- tasks and submissions ---------------------------------------------------------------
    def task_access(self, name: str | None = None) -> dict[str, TaskAccess]:
        """Who owns each task and whether it is private (``name``: that task's alone). Three
        columns: every request naming a task asks, and the rows hold each task's spec."""
        query = select(TaskRow.name, TaskRow.owner_id, TaskRow.private)
        if name is not None:
            query = query.where(TaskRow.name == name)
        with self.db.engine.connect() as connection:
            return {
                task: TaskAccess(task, owner, bool(private))
                for task, owner, private in connection.execute(query)
            }

    def set_task_access(self, task: str, owner: str | None, private: bool) -> TaskAccess:
        """Give ``task`` an owner (a user name, or None) and a privacy flag."""
        with self.db.session() as session, session.begin():
            row = session.get(TaskRow, task)
            if row is None:
                raise AccountError("unknown_task", f"no task {task!r}")
            owner_id = None
            if owner is not None:
                user = session.scalars(select(UserRow).where(UserRow.name == owner)).first()
                if user is None:
                    raise AccountError("unknown_user", f"no user {owner!r}")
                owner_id = user.id
            row.owner_id, row.private = owner_id, private
        return TaskAccess(task, owner_id, private)

    def set_model_owner(self, model_id: str, user_id: str | None) -> None:
        with self.db.session() as session, session.begin():
            row = session.get(ModelRow, model_id)
            if row is not None:
                row.owner_id = user_id

    def model_access(self, model_id: str) -> tuple[str, str | None] | None:
        """(task, owner id) of a submission, or None when there is none."""
        found = self.model_publication(model_id)
        return (found.task, found.owner_id) if found else None

    def model_publication(self, model_id: str) -> ModelAccess | None:
        """A submission's task, owner and publication, or None when there is none."""
        with self.db.session() as session:
            row = session.get(ModelRow, model_id)
            return ModelAccess(row.id, row.task, row.owner_id, bool(row.published)) if row else None

    def task_publications(self, task: str) -> list[ModelAccess]:
        """Every submission of ``task`` with its owner and publication, in one query (a
        leaderboard page decides which of its models the viewer may open)."""
        with self.db.session() as session:
            rows = session.execute(
                select(ModelRow.id, ModelRow.owner_id, ModelRow.published).where(
                    ModelRow.task == task
                )
            )
            return [ModelAccess(i, task, owner, bool(published)) for i, owner, published in rows]

    def set_published(self, model_id: str, published: bool) -> ModelAccess | None:
        """Publish or unpublish a submission; None when there is none."""
        with self.db.session() as session, session.begin():
            row = session.get(ModelRow, model_id)
            if row is None:
                return None
            row.published = published
            return ModelAccess(row.id, row.task, row.owner_id, published)

    def user_name(self, user_id: str | None) -> str | None:
        """A user's name by id (None for no or an unknown user)."""
        with self.db.session() as session:
            user = session.get(UserRow, user_id) if user_id else None
            return user.name if user else None


def _owned_tasks(session: Session, user_id: str) -> frozenset[str]:
    return frozenset(session.scalars(select(TaskRow.name).where(TaskRow.owner_id == user_id)))


def _check_within(row: TokenRow, within: frozenset[str] | None, verb: str) -> None:
    """``scope_not_allowed`` when the token holds scopes the asking credential (``within``;
    None: trusted local use) lacks: no weaker credential may rotate or revoke it."""
    beyond = set(row.scopes.split()) - within if within is not None else set()
    if beyond:
        raise AccountError(
            "scope_not_allowed",
            f"the token holds scope(s) {', '.join(sorted(beyond))} that your credentials do "
            f"not: {verb} it with credentials that hold them",
        )


def _owned_token(session: Session, user_id: str, token_id: str, kind: str) -> TokenRow | None:
    row = session.get(TokenRow, token_id)
    return row if row is not None and row.user_id == user_id and row.kind == kind else None


def _new_token(
    user_id: str,
    kind: str,
    name: str,
    scopes: frozenset[str],
    expires_at: datetime | None,
    now: datetime,
) -> tuple[str, TokenRow]:
    secret = TOKEN_PREFIX + secrets.token_urlsafe(32)
    row = TokenRow(
        id=str(uuid.uuid4()),
        user_id=user_id,
        kind=kind,
        name=name,
        prefix=secret[: len(TOKEN_PREFIX) + 6],
        secret_hash=hash_secret(secret),
        scopes=" ".join(s for s in SCOPES if s in scopes),
        created_at=now,
        expires_at=expires_at,
        revoked_at=None,
        last_used_at=None,
    )
    return secret, row


def _utc(moment: datetime | None) -> str | None:
    return moment.isoformat() + "Z" if moment else None


def _user_dict(user: UserRow) -> UserInfo:
    return {
        "id": user.id,
        "name": user.name,
        "role": user.role,
        "has_password": user.password_hash is not None,
        "created_at": _utc(user.created_at),
    }


def _token_dict(row: TokenRow, now: datetime | None = None) -> TokenInfo:
    state = "active"
    if row.revoked_at is not None:
        state = "revoked"
    elif row.expires_at is not None and now is not None and row.expires_at <= now:
        state = "expired"
    return {
        "id": row.id,
        "name": row.name,
        "prefix": row.prefix,
        "scopes": row.scopes.split(),
        "state": state,
        "created_at": _utc(row.created_at),
        "expires_at": _utc(row.expires_at),
        "revoked_at": _utc(row.revoked_at),
        "last_used_at": _utc(row.last_used_at),
    }
