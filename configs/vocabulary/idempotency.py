"""The submission idempotency key, as the API reads it and the SDK and CLI send it."""

from __future__ import annotations

import re

IDEMPOTENCY_HEADER = "Idempotency-Key"
IDEMPOTENCY_KEY = re.compile(r"^[A-Za-z0-9._:-]{1,128}$")
