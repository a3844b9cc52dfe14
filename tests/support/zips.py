"""Zips that lie: the damaged archives upload paths must refuse cleanly."""

from __future__ import annotations

import io
import struct
import zipfile

_LOCAL = b"PK\x03\x04"
_CENTRAL = b"PK\x01\x02"


def lying_zip(entries: dict[str, bytes | str], *, claimed_size: int = 10) -> bytes:
    """A deflated zip whose local and central headers all claim each member unpacks to
    `claimed_size` bytes (what a zip bomb does to slip past a size check): reading a member
    fails with a CRC error."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in entries.items():
            zf.writestr(name, data)
    raw = bytearray(buffer.getvalue())
    for signature, offset in ((_LOCAL, 22), (_CENTRAL, 24)):
        start = raw.find(signature)
        while start != -1:
            struct.pack_into("<I", raw, start + offset, claimed_size)
            start = raw.find(signature, start + 4)
    return bytes(raw)


def truncated_zip(entries: dict[str, bytes | str]) -> bytes:
    """A zip whose members' compressed data was cut in half (headers intact)."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in entries.items():
            zf.writestr(name, data)
    raw = bytearray(buffer.getvalue())
    with zipfile.ZipFile(io.BytesIO(bytes(raw))) as zf:
        for info in zf.infolist():
            data_start = info.header_offset + 30 + len(info.filename.encode())
            cut = data_start + info.compress_size // 2
            raw[cut : data_start + info.compress_size] = b"\x00" * (
                data_start + info.compress_size - cut
            )
    return bytes(raw)
