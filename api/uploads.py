"""Resumable uploads over HTTP (``usecases.uploads``): start one, PUT its parts (each with
its ``Content-Digest``), ask which arrived, submit it as a model, or drop it."""

from __future__ import annotations

import base64
import binascii
import re
from typing import Any

from flask import request, url_for
from flask.views import MethodView
from marshmallow import Schema, fields, validate

from api.auth import principal
from api.bodies import Blueprint
from api.context import service, task_or_404
from api.docs import error_docs, success_docs
from api.errors import ApiError
from api.ratelimit import part_of_a_write
from usecases.uploads import (
    ReceivedPart,
    UploadStatus,
    abandon_upload,
    open_uploads,
    receive_part,
    receiving_upload,
    start_upload,
    upload_status,
)

DIGEST_HEADER = "Content-Digest"
MAX_DIGEST_HEADER = 512
# RFC 9530's Content-Digest: a dictionary of algorithm=:base64:, of which we check these
_MEMBER = re.compile(r"\s*([A-Za-z0-9-]+)\s*=\s*:([A-Za-z0-9+/=]*):\s*")
DIGEST_BYTES = {"sha-256": 32, "sha-512": 64}

blp = Blueprint(
    "uploads",
    __name__,
    url_prefix="/api/v1",
    description="Resumable uploads of large model images, a part at a time",
)
ERRORS = {
    400: "bad_digest (a Content-Digest that is unreadable, too long, or names neither "
    "sha-256 nor sha-512)",
    401: "unauthenticated (no or unknown credentials), token_expired or token_revoked",
    403: "insufficient_scope or cross_site_refused",
    404: "unknown_task or unknown_upload (also another's upload)",
    409: "upload_submitted (it became a submission, named in the message), upload_busy "
    "(it is being submitted) or upload_interrupted (its parts were joined before its "
    "submission was interrupted: submit it again, or delete it)",
    413: "image_too_large (the upload's size is over the task's image limit)",
    422: "a body field out of range; invalid_part (a part number out of range, or a body "
    "not exactly the part's size) or part_digest_mismatch (the part was not stored: send "
    "it again)",
    429: "too_many_uploads (3 unfinished uploads: submit or delete one) or rate_limited",
}
errors = error_docs(blp, ERRORS)
ok = success_docs(blp)

# A label for people and logs: no path separators, control characters (C0, C1) or
# direction overrides, and not "." or ".."
FILENAME = validate.Regexp(
    r"^(?!\.{1,2}$)[^\x00-\x1f\x7f-\x9f/\\\u200e\u200f\u202a-\u202e\u2066-\u2069]{1,255}$",
    error="1-255 characters, no / \\ or control characters, not . or ..",
)


class UploadStartSchema(Schema):
    size = fields.Integer(
        required=True,
        strict=True,
        validate=validate.Range(min=1, max=2**62),
        metadata={"description": "the tarball's size in bytes (at most the task's image limit)"},
    )
    filename = fields.String(load_default="upload.tar", validate=FILENAME)


class UploadListSchema(Schema):
    uploads = fields.List(fields.Nested(lambda: UploadSchema()), required=True)


class UploadSchema(Schema):
    id = fields.String(required=True)
    task = fields.String(required=True)
    filename = fields.String(required=True)
    size = fields.Integer(required=True)
    part_bytes = fields.Integer(
        required=True, metadata={"description": "every part's size but the last's"}
    )
    parts = fields.Integer(required=True, metadata={"description": "how many parts make it"})
    received = fields.List(
        fields.Integer(), required=True, metadata={"description": "part numbers stored"}
    )
    received_bytes = fields.Integer(required=True)
    state = fields.String(
        required=True,
        validate=validate.OneOf(["receiving", "finishing", "interrupted", "submitted"]),
        metadata={
            "description": "receiving parts; finishing: being submitted; interrupted: the "
            "request submitting it died after joining its parts (submit it again, or delete "
            "it); submitted"
        },
    )
    submission = fields.String(
        allow_none=True, required=True, metadata={"description": "the submission it became"}
    )
    expires_at = fields.String(
        required=True, metadata={"description": "when it is dropped unless a part arrives"}
    )
    url = fields.String(required=True)


class PartSchema(Schema):
    number = fields.Integer(required=True)
    size = fields.Integer(required=True)
    sha256 = fields.String(required=True, metadata={"description": "of the bytes stored, hex"})


PART_BODY = {
    "required": True,
    "description": "the part's bytes: exactly part_bytes, the last part the rest",
    "content": {"application/octet-stream": {"schema": {"type": "string", "format": "binary"}}},
}
DIGEST_PARAMETER = {
    "in": "header",
    "name": DIGEST_HEADER,
    "required": False,
    "schema": {
        "type": "string",
        "maxLength": MAX_DIGEST_HEADER,
        "pattern": r"^\s*[A-Za-z0-9-]+\s*=\s*:[A-Za-z0-9+/=]*:\s*"
        r"(,\s*[A-Za-z0-9-]+\s*=\s*:[A-Za-z0-9+/=]*:\s*)*$",
    },
    "description": "sha-256=:<base64>: and/or sha-512=:<base64>: (RFC 9530): a part that "
    "differs is not stored; a header naming neither is 400 bad_digest",
}


def _body(status: UploadStatus) -> dict[str, Any]:
    record = status.record
    return {
        "id": record.id,
        "task": record.task,
        "filename": record.filename,
        "size": record.size,
        "part_bytes": record.part_bytes,
        "parts": status.parts,
        "received": list(status.received),
        "received_bytes": status.received_bytes,
        "state": record.state.value,
        "submission": record.model_id,
        "expires_at": record.expires_at.isoformat() + "Z",
        "url": url_for("uploads.Upload", upload_id=record.id),
    }


@blp.route("/tasks/<task_name>/uploads", methods=["POST"])
@blp.arguments(UploadStartSchema)
@blp.response(201, UploadSchema)
@errors(401, 403, 404, 413, 422, 429)
def start(data: dict[str, Any], task_name: str) -> dict[str, Any]:
    """Start a resumable upload of a ``docker save`` tarball of ``size`` bytes. Then PUT
    its parts, and submit it with ``{"name", "upload": <id>}`` to the task's submissions.
    An upload no part reaches for 24 hours is dropped."""
    task = task_or_404(task_name)
    return _body(start_upload(service(), task, principal(), data["size"], data["filename"]))


@blp.route("/uploads")
@ok(UploadListSchema)
@errors(401, 403)
def list_uploads() -> dict[str, Any]:
    """Your unfinished uploads, oldest first: to resume one whose id a dead client took
    with it, or to drop one (3 may be unfinished at once)."""
    return {"uploads": [_body(found) for found in open_uploads(service(), principal())]}


@blp.route("/uploads/<upload_id>")
class Upload(MethodView):
    @ok(UploadSchema)
    @errors(401, 403, 404)
    def get(self, upload_id: str) -> dict[str, Any]:
        """Where an upload of yours stands: the parts stored (send the others to resume)."""
        return _body(upload_status(service(), principal(), upload_id))

    @ok(UploadSchema)
    @errors(401, 403, 404, 409)
    def delete(self, upload_id: str) -> dict[str, Any]:
        """Drop an unfinished upload of yours and its parts; answers it as it was."""
        return _body(abandon_upload(service(), principal(), upload_id))


@blp.route("/uploads/<upload_id>/parts/<int(signed=True):number>", methods=["PUT"])
@ok(PartSchema)
@errors(400, 401, 403, 404, 409, 422)
@blp.doc(requestBody=PART_BODY, parameters=[DIGEST_PARAMETER])
@part_of_a_write
def put_part(upload_id: str, number: int) -> dict[str, Any]:
    """Store part ``number`` (from 1) of an upload of yours; sending it again replaces it.
    Its size must be exact. Parts are not rate-limited one by one: starting paid."""
    receiving_upload(service(), principal(), upload_id)  # another's is 404 before all else
    digests = _digests(request.headers.get(DIGEST_HEADER))
    found: ReceivedPart = receive_part(
        service(), principal(), upload_id, number, request.stream, request.content_length, digests
    )
    return {"number": found.number, "size": found.size, "sha256": found.sha256}


def _digests(header: str | None) -> dict[str, bytes]:
    """The digests a Content-Digest header gives that we check (sha-256, sha-512; names in
    any case); 400 ``bad_digest`` for one we cannot read, or a header naming none of them."""
    if header is None:
        return {}
    bad = ApiError(
        400,
        "bad_digest",
        f"{DIGEST_HEADER}: give sha-256=:<base64>: (or sha-512), at most "
        f"{MAX_DIGEST_HEADER} characters",
    )
    if len(header) > MAX_DIGEST_HEADER:
        raise bad
    found: dict[str, bytes] = {}
    for member in header.split(","):
        match = _MEMBER.fullmatch(member)
        if match is None:
            raise bad
        name = match.group(1).lower()
        if name not in DIGEST_BYTES:
            continue  # an algorithm we do not check (md5, sha-1): RFC 9530 lets us ignore it
        try:
            raw = base64.b64decode(match.group(2), validate=True)
        except binascii.Error:
            raise bad from None
        if len(raw) != DIGEST_BYTES[name]:
            raise bad
        found[name] = raw
    if not found:
        raise bad  # the client asked for a check we cannot make: say so, store nothing
    return found
