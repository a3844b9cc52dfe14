"""The one error type services raise; the API, the websocket and the tools all render it."""

from __future__ import annotations

from typing import Any


class ServiceError(Exception):
    """A refused operation with a stable machine-readable `code` and a human message.

    `details` carries extra context for the caller (current entries, usage, …) and is
    rendered next to code and message in API errors and tool results.
    """

    status_code = 400

    def __init__(self, code: str, message: str, *, status: int | None = None, **details: Any):
        super().__init__(message)
        self.code = code
        self.message = message
        self.details = details
        if status is not None:
            self.status_code = status

    def as_dict(self) -> dict[str, Any]:
        return {"code": self.code, "message": self.message, **self.details}


class NotFound(ServiceError):
    """Raised by `access_*` selectors; the same for missing rows and other users' rows."""

    status_code = 404

    def __init__(self, what: str = "object") -> None:
        super().__init__("not_found", f"No such {what}.")
