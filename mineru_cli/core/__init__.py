"""The core types of mineru-cli: blocks, page records and their vocabularies, the two errors.

Dependency-free: this package imports nothing else of mineru-cli (the import contract in
pyproject.toml holds it to that), so every layer can use it.
"""

from .blocks import Block, BlockType
from .errors import ErrorInfo, OutputError, PageError, SetupError
from .record import SCHEMA_VERSION, CacheInfo, ImageInfo, PageRecord, page_id, split_page_id
from .words import CacheStatus, ErrorKind, Stage, Status

__all__ = [
    "Block",
    "BlockType",
    "CacheInfo",
    "CacheStatus",
    "ErrorInfo",
    "ErrorKind",
    "ImageInfo",
    "OutputError",
    "PageError",
    "PageRecord",
    "SCHEMA_VERSION",
    "SetupError",
    "Stage",
    "Status",
    "page_id",
    "split_page_id",
]
