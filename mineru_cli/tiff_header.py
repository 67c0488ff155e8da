"""What is wrong with a TIFF that Pillow cannot read, in a user's terms.

A TIFF keeps each page's size, compression and the place of its data in an image file directory
(IFD), which writers mostly put at the end of the file: a copy or download that stops early
loses it, and Pillow then says only "cannot identify image file" or "decoder error -2". The
header's pointer to the first directory tells a file cut short from one damaged inside.
"""

from __future__ import annotations

import struct
from typing import BinaryIO

_CLASSIC = {b"II*\x00": "<", b"MM\x00*": ">"}
_BIG = (b"II+\x00", b"MM\x00+")
_ENTRY_BYTES = 12
_COMPRESSION = 259  # the directory entry that names the page's compression scheme
DIRECTORY = "image file directory (each page's size, layout and where its data lies)"


def is_tiff(f: BinaryIO) -> bool:
    f.seek(0)
    head = f.read(4)
    return head in _CLASSIC or head in _BIG


def cut_short(f: BinaryIO) -> str | None:
    """How the classic TIFF open in `f` is cut short: its first directory lies past the end of
    the file, or the file ends inside it; None when the directory is all there (or the file is a
    BigTIFF, whose directory this does not read)."""
    f.seek(0)
    head = f.read(8)
    order = _CLASSIC.get(head[:4])
    if order is None:
        return None
    size = f.seek(0, 2)
    if len(head) < 8:
        return f"the file ends at byte {size}, inside the TIFF header"
    (offset,) = struct.unpack(order + "I", head[4:8])
    if offset + 2 > size:
        return f"its {DIRECTORY} should be at byte {offset}, but the file ends at byte {size}"
    f.seek(offset)
    (count,) = struct.unpack(order + "H", f.read(2))
    end = offset + 2 + count * _ENTRY_BYTES + 4
    if end > size:
        return (
            f"its {DIRECTORY} at byte {offset} says it holds {count} entries, which end at byte {end}, "
            f"but the file ends at byte {size}"
        )
    return None


def compression(f: BinaryIO) -> int | None:
    """The compression code of the classic TIFF's first page (its directory's entry 259), or None
    where the directory or that entry is not there whole (see cut_short) or the file is a BigTIFF."""
    f.seek(0)
    head = f.read(8)
    order = _CLASSIC.get(head[:4])
    if order is None or len(head) < 8 or cut_short(f):
        return None
    (offset,) = struct.unpack(order + "I", head[4:8])
    f.seek(offset)
    (count,) = struct.unpack(order + "H", f.read(2))
    for _ in range(count):
        tag, kind, _n, value = struct.unpack(order + "HHI4s", f.read(_ENTRY_BYTES))
        if tag == _COMPRESSION:  # a SHORT (type 3) or a LONG, kept in the entry itself
            return struct.unpack(order + ("H" if kind == 3 else "I"), value[: 2 if kind == 3 else 4])[0]
    return None
