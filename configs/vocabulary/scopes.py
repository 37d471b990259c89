"""What a credential may do: the scope names every layer (the API, the SDK, the CLI) shares.

``read`` reads what is yours, ``submit`` writes, ``tokens`` manages your own API tokens and
``admin`` is the operator's; the rights table (``api.rights``) says which route needs which.
"""

from __future__ import annotations

READ, SUBMIT, TOKENS, ADMIN_SCOPE = "read", "submit", "tokens", "admin"
SCOPES = (READ, SUBMIT, TOKENS, ADMIN_SCOPE)
# What a new API token holds unless asked otherwise: no token management, no admin.
DEFAULT_TOKEN_SCOPES = (READ, SUBMIT)

# The longest token lifetime: ten years (a date past year 9999 cannot even be stored).
MAX_TOKEN_DAYS = 3650.0
