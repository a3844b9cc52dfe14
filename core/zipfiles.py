"""Reading uploaded zips: an archive whose headers lie (sizes, CRCs, compression method) or
that is cut short fails while a member is read, not when it is opened, and Python reports
that with half a dozen exception types. Every upload path turns them into one refusal."""

from __future__ import annotations

import lzma
import zipfile
import zlib
from collections.abc import Iterator
from contextlib import contextmanager

from django.utils.translation import gettext_lazy

from .exceptions import ServiceError, lazy_format

# BadZipFile: bad CRC, bad local header; zlib/lzma errors and EOFError: corrupt or truncated
# compressed data; NotImplementedError: an unsupported compression method; RuntimeError: an
# encrypted member; ValueError: a central directory zipfile cannot make sense of.
ZIP_ERRORS: tuple[type[BaseException], ...] = (
    zipfile.BadZipFile,
    zlib.error,
    lzma.LZMAError,
    EOFError,
    NotImplementedError,
    RuntimeError,
    ValueError,
)


@contextmanager
def zip_errors(what: str = "") -> Iterator[None]:
    """Turn a damaged archive into ServiceError("invalid_zip") naming `what` was being read
    (a member name; empty while opening the archive itself)."""
    try:
        yield
    except ZIP_ERRORS as exc:
        if what:
            message = lazy_format(
                gettext_lazy("The zip is damaged: %(name)s could not be read (%(error)s)."),
                name=repr(what),
                error=str(exc),
            )
        else:
            message = gettext_lazy("That file is not a zip archive.")
        raise ServiceError("invalid_zip", message) from None
