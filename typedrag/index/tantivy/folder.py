"""The index folder on disk: which folders a build may replace, the lock beside one, the swap of a new version
into place (and its recovery after a kill), and the leftovers of killed processes."""

from __future__ import annotations

import contextlib
import glob
import os
import secrets
import shutil
import tempfile
from pathlib import Path

from typedrag.index.base import IndexBuildError
from typedrag.index.manifest import is_typedrag_index
from typedrag.index.tantivy.schema import ENGINE

try:
    import fcntl
except ImportError:  # Windows: no flock; builds there are not guarded against each other
    fcntl = None


# A reader's private folder of symlinks in the temporary folder: "<prefix><pid>-<random>".
MIRROR_PREFIX = "typedrag-index-"


def check_target(index_dir: Path) -> None:
    """Refuse any folder but an absent one, an empty one, or a typedrag index: never delete anything else."""
    resolved, cwd = index_dir.resolve(), Path.cwd().resolve()
    if cwd == resolved or cwd.is_relative_to(resolved):
        raise IndexBuildError(
            f"{index_dir} is the current folder or one of its parents; give --index a new or empty folder, "
            "e.g. --index typedrag-index"
        )
    if not index_dir.exists() and not index_dir.is_symlink():
        return
    if os.path.ismount(index_dir):
        raise IndexBuildError(f"{index_dir} is a mount point; give --index a new folder inside it")
    if not index_dir.is_dir() or index_dir.is_symlink():
        raise IndexBuildError(f"{index_dir} exists and is not a typedrag index (not a folder); refusing to replace it")
    if not any(index_dir.iterdir()):
        return
    ok, why = is_typedrag_index(index_dir, ENGINE)
    if not ok:
        raise IndexBuildError(
            f"{index_dir} exists and is not a typedrag index ({why}); refusing to replace it: "
            "give --index a new or empty folder"
        )


@contextlib.contextmanager
def build_lock(index_dir: Path):
    """An exclusive flock on `.NAME.lock` beside the index for the whole build (not inside it: the folder is
    swapped for the new one); the kernel releases it when the process dies, so a killed build never leaves a
    stale lock. The file is removed when the build ends, still locked, so nothing is left beside the index; a
    build that locked a file removed meanwhile sees that the name is no longer its file and locks the name again
    (the protocol that lets lock files be deleted: two builds never hold two different files)."""
    if fcntl is None:
        yield
        return
    path = index_dir.parent / f".{index_dir.name}.lock"
    while True:
        handle = open(path, "a+b")
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.close()
            raise IndexBuildError(
                f"another typedrag build is writing {index_dir} (it holds {path}); wait for it to finish"
            ) from None
        if _same_file(handle, path):
            break
        handle.close()  # the build that held it removed it while this one waited: lock the name anew
    try:
        yield
    finally:
        with contextlib.suppress(OSError):
            path.unlink()
        handle.close()  # releases the lock


def _same_file(handle, path: Path) -> bool:
    """Whether `path` still names the open file `handle`."""
    try:
        named = path.stat()
    except FileNotFoundError:
        return False
    opened = os.fstat(handle.fileno())
    return (named.st_dev, named.st_ino) == (opened.st_dev, opened.st_ino)


def recover_interrupted_swap(index_dir: Path) -> None:
    """Undo a kill during `swap_into_place` (call under the build lock, so no swap is running).

    Killed between its two renames, the previous index sits alone in `.NAME.old-*`: put the newest
    typedrag index of those back in place. Killed before deleting it, `.old-*` is a superseded copy:
    delete it. Only folders that are typedrag indexes are touched.
    """
    olds = [
        p
        for p in index_dir.parent.glob(f".{glob.escape(index_dir.name)}.old-*")
        if p.is_dir() and not p.is_symlink() and is_typedrag_index(p, ENGINE)[0]
    ]
    olds.sort(key=lambda p: p.stat().st_mtime, reverse=True)
    if olds and not index_dir.exists() and not index_dir.is_symlink():
        olds.pop(0).rename(index_dir)
    for old in olds:
        shutil.rmtree(old, ignore_errors=True)


def remove_abandoned_builds(index_dir: Path) -> None:
    """Delete the temporary directories of earlier builds whose process is gone (killed mid-build)."""
    for stale in index_dir.parent.glob(f".{glob.escape(index_dir.name)}.building-*"):
        _remove_if_its_process_is_gone(stale, stale.name.rsplit("-", 2)[-2])


def _remove_if_its_process_is_gone(folder: Path, pid: str) -> None:
    """Delete a temporary folder named by the process that made it, once that process is gone (never a symlink)."""
    if pid.isdigit() and not _running(int(pid)) and not folder.is_symlink():
        shutil.rmtree(folder, ignore_errors=True)


def _running(pid: int) -> bool:
    if os.name != "posix":  # no cheap liveness check (signal 0 means Ctrl-C on Windows): keep the directory
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # alive, but another user's
        pass
    return True


def swap_into_place(building: Path, index_dir: Path) -> None:
    """Two renames; readers that already opened the old index keep their open files."""
    old = None
    if index_dir.exists():
        old = index_dir.parent / f".{index_dir.name}.old-{secrets.token_hex(4)}"
        index_dir.rename(old)
    building.rename(index_dir)
    if old:
        shutil.rmtree(old, ignore_errors=True)


def symlink_mirror(index_dir: Path, files: dict) -> tempfile.TemporaryDirectory | None:
    """A temporary folder of symlinks to the index's files, where tantivy may write its lock files.

    None (open in place) where symlinks are unavailable (Windows without the privilege) or no temporary
    folder is writable. Removed when the retriever is garbage-collected or the process exits; the
    searcher keeps the files it mapped, so it is unaffected by a rebuild swapping a new index in.
    """
    _remove_abandoned_mirrors()
    try:
        mirror = tempfile.TemporaryDirectory(prefix=f"{MIRROR_PREFIX}{os.getpid()}-")
    except OSError:
        return None
    try:
        for name in files:
            os.symlink((index_dir / name).resolve(), os.path.join(mirror.name, name))
    except (OSError, NotImplementedError):
        mirror.cleanup()
        return None
    return mirror


def _remove_abandoned_mirrors() -> None:
    """Delete the symlink folders of readers whose process is gone: one killed (SIGKILL, OOM) never ran
    the cleanup that exit or garbage collection does, and each would stay in the temporary folder."""
    try:
        leftovers = list(Path(tempfile.gettempdir()).glob(f"{MIRROR_PREFIX}*-*"))
    except OSError:
        return
    for stale in leftovers:
        _remove_if_its_process_is_gone(stale, stale.name[len(MIRROR_PREFIX) :].split("-", 1)[0])
