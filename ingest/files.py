"""A run folder's files: the folders never read, and the one walk that ingest, watch's fingerprint and fleet share,
so that what the watch looks at for changes is what ingest reads."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ingest.records import Issue

# Folders that are never part of a run's evidence (and can be huge). Discovery skips these and every hidden folder.
SKIP_DIRS = frozenset({".git", "__pycache__", ".venv", "venv", "node_modules", ".ipynb_checkpoints", ".hypothesis"})


def folders(root: Path, on_error: Callable[[OSError], None]) -> Iterator[tuple[str, list[os.DirEntry]]]:
    """Each folder below `root` with its entries that are not folders, by name: `root` first, then its sub-folders
    by name, depth first (os.walk's top-down order). Symlinked folders are not followed (os.walk's default) and
    SKIP_DIRS are not entered; a folder that cannot be listed goes to `on_error` and is passed over (`root`'s
    error, if any, comes before anything is yielded)."""
    stack = [str(root)]
    while stack:
        folder = stack.pop()
        try:
            with os.scandir(folder) as it:
                entries = list(it)
        except OSError as exc:
            on_error(exc)
            continue
        subfolders, others = [], []
        for e in entries:
            try:
                is_dir = e.is_dir()  # a link to a folder is a folder here, as in os.walk: listed, not entered
            except OSError:
                is_dir = False
            (subfolders if is_dir else others).append(e)
        others.sort(key=lambda e: e.name)
        yield folder, others
        stack.extend(e.path for e in sorted(subfolders, key=lambda e: e.name, reverse=True)
                     if e.name not in SKIP_DIRS and not e.is_symlink())


def is_read(entry: os.DirEntry, root: Path, follow_links: bool) -> bool | None:
    """Whether ingest reads this entry of a run folder (`root`, resolved): True for a regular file, a file link
    included; None for a file link that leads out of `root` and is not followed (`follow_links`: `outside.log ->
    /etc/passwd` must not make the tool read, store and show a file elsewhere); False for the rest (a broken
    link, a socket)."""
    try:
        if not entry.is_file():
            return False
    except OSError:
        return False
    if entry.is_symlink() and not follow_links and not Path(entry.path).resolve().is_relative_to(root):
        return None
    return True


def walk(root: Path, skipped: list[tuple[str, Issue]] | None = None, *,
         follow_links: bool = False) -> list[PurePosixPath]:
    """Every regular file below `root` (a resolved path) that ingest reads (`is_read`), relative, in `folders`'
    order.

    A folder that cannot be listed is not silently dropped: it and each link passed over go to `skipped` as
    (path, Issue), so the run is not called healthy on what was left out."""
    from ingest.names import storable
    from ingest.records import Issue

    found: list[PurePosixPath] = []
    skipped = [] if skipped is None else skipped

    def unlisted(err: OSError) -> None:
        rel = os.path.relpath(err.filename, root) if err.filename else "."
        skipped.append((storable(rel), Issue(None, "unreadable", f"folder {storable(rel)} cannot be listed "
                                             f"({err.strerror or err}); its files were not read")))

    for folder, entries in folders(root, unlisted):
        rel_dir = Path(folder).relative_to(root)
        for e in entries:
            rel = PurePosixPath(rel_dir.as_posix()) / e.name if str(rel_dir) != "." else PurePosixPath(e.name)
            read = is_read(e, root, follow_links)
            if read is None:
                from ingest.wandb_files import wandb_own_link

                if wandb_own_link(rel, Path(e.path).resolve()):
                    continue  # W&B's link to its service's log in the user's cache: the tool's, not the run's
                skipped.append((storable(str(rel)), Issue(None, "outside_run", "a link to a file outside the run "
                                                          "directory; not followed")))
            elif read:
                found.append(rel)
    return found
