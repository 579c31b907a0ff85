"""``--shadow TIER``: each agent's call sent again, to a tier of the user's choosing (its own base URL and key, the
model swapped for the tier's), its answer measured as the relayed ones are and raced beside them on a lane of its
own; the agent never sees it (docs/design.md §13)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Final

from .http1 import HOP_BY_HOP, Head
from .routes import Upstream

NOT_SENT_ON: Final[frozenset[str]] = HOP_BY_HOP | {
    "host", "content-length", "content-encoding", "transfer-encoding", "authorization", "x-api-key", "api-key",
    "cookie", "x-goog-api-key"}
"""Request headers a shadow does not copy: the connection's, the body's framing (the copy is sent whole and
plain), and the client's credentials (the tier's key goes instead)."""

PROTOCOLS: Final[dict[str, str]] = {"anthropic": "anthropic", "openai": "openai",
                                    "openai-responses": "openai-responses"}
"""The tier providers a shadow can speak for, and the protocol of the calls each can take."""


@dataclass(frozen=True, slots=True)
class Shadow:
    """Where a shadow sends its copies, and how it names itself."""

    name: str
    upstream: Upstream
    protocol: str
    model: str

    @property
    def label(self) -> str:
        return f"shadow {self.name}"

    def copy(self, path: str, protocol: str | None, head: Head, body: bytes) -> tuple[Head, bytes] | str:
        """The shadow's request for an agent's call, or why it cannot be sent (another protocol, not JSON)."""
        if protocol != self.protocol:
            return f"{self.label} speaks {self.protocol}; a {protocol or 'non-model'} call is not shadowed"
        try:
            payload = json.loads(body)
        except (ValueError, RecursionError):
            return f"{self.label}: the call's body is not JSON"
        if not isinstance(payload, dict):
            return f"{self.label}: the call's body is not a JSON object"
        if self.model:
            payload["model"] = self.model
        data = json.dumps(payload, ensure_ascii=False, separators=(",", ":")).encode()
        headers = [(k, v) for k, v in head.headers if k.lower() not in NOT_SENT_ON]
        headers.append(("content-length", str(len(data))))
        return Head(("POST", path, "HTTP/1.1"), headers), data
