"""Whether this process may write in a folder, asked as the kernel judges its writes."""

from __future__ import annotations

import os
from pathlib import Path


def may_write_in(folder: Path) -> bool:
    """Whether this process may make (and rename) files in the existing `folder`: asked with its
    effective ids and capabilities, as the kernel judges its writes. os.access's default answers
    for the real user id without capabilities, which refuses a service user given
    CAP_DAC_OVERRIDE a folder it may write in. Nothing is made: --explain-plan and doctor ask too."""
    return os.access(folder, os.W_OK | os.X_OK, effective_ids=os.access in os.supports_effective_ids)


def missing_folders(folder: Path) -> list[Path]:
    """`folder` and the folders above it that are not there (nearest first): what making it
    makes, for remove_empty to take back."""
    return [f for f in (folder, *folder.parents) if not f.exists()]


def remove_empty(folders: list[Path]) -> None:
    """Remove `folders` (nearest first, as missing_folders gives them) while they are empty: a
    command that failed at set-up leaves none of the folders it made. One that is not empty (or
    not ours to remove) stays, and so do the folders above it."""
    for folder in folders:
        try:
            folder.rmdir()
        except OSError:
            return
