"""One writer per run directory: an exclusive ``fcntl.flock`` on RUN/.lock, held for the life
of a run (docs/run_directory.md, "What a run directory guarantees").

The kernel releases a flock when its holder exits, however it exits (``kill -9``
included), so a lock left by a dead process is simply taken over; the pid written into the
file only serves the message a second writer gets. The file is never deleted (deleting a
lock file while another process waits on it would let two processes hold "the" lock).
Local filesystems only: flock over NFS is not reliable on every system.

The lock is opened with ``O_NOFOLLOW`` and must be a regular file with one link: a
``.lock`` that is a symbolic link, a hard link to another file, a fifo or a device is
refused (``RunDirBusyError``'s sibling ``RunLockFileError``) before anything is written
to it, so no file outside the run is ever truncated through it.
"""
from __future__ import annotations

import errno
import fcntl
import os
import stat
from pathlib import Path

from ..errors import UsageError

LOCK_NAME = ".lock"


class RunDirBusyError(UsageError):
    """Another live process holds the run directory's lock (the message names its pid);
    `sharpo` prints it as one line and exits 2."""


class RunLockFileError(UsageError):
    """RUN/.lock is not a plain file of the run (a symbolic or hard link, a fifo, ...);
    refused without writing to it. `sharpo` prints it as one line and exits 2."""


def _open_lock(path: Path) -> int:
    """O_RDWR | O_CREAT without following a symbolic link; the descriptor of a regular
    file with exactly one link, else RunLockFileError (nothing written)."""
    flags = os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK
    try:
        fd = os.open(path, flags, 0o644)
    except OSError as exc:
        if exc.errno == errno.ELOOP or path.is_symlink():
            raise RunLockFileError(f"{path}: is a symbolic link; a run's lock file must be a "
                                   f"plain file inside the run (remove the link)") from None
        raise
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode) or st.st_nlink != 1:
        os.close(fd)
        what = "not a regular file" if not stat.S_ISREG(st.st_mode) else \
            f"a hard link ({st.st_nlink} names for one file)"
        raise RunLockFileError(f"{path}: {what}; a run's lock file must be a plain file "
                               f"of its own (remove it)")
    return fd


class RunLock:
    """``with RunLock(run_dir): ...`` or ``acquire()`` / ``release()``. Not reentrant: a
    second RunLock on the same directory fails even in the same process."""

    def __init__(self, run_dir: str | Path):
        self.run_dir = Path(run_dir)
        self.path = self.run_dir / LOCK_NAME
        self._fd: int | None = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    def acquire(self) -> "RunLock":
        if self._fd is not None:
            return self
        fd = _open_lock(self.path)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _read_pid(fd)
            os.close(fd)
            who = f"pid {holder}" if holder else "a process that has not written its pid yet"
            raise RunDirBusyError(f"run_dir: {self.run_dir} is in use by another sharpo "
                                  f"process ({who}, lock {self.path})") from None
        except BaseException:
            os.close(fd)
            raise
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self._fd = fd
        return self

    def release(self) -> None:
        fd, self._fd = self._fd, None
        if fd is None:
            return
        try:
            os.ftruncate(fd, 0)          # no stale pid for the next reader
        finally:
            os.close(fd)                 # closing the descriptor drops the flock

    def __enter__(self) -> "RunLock":
        return self.acquire()

    def __exit__(self, *exc) -> None:
        self.release()

    def __del__(self):                   # a Trainer dropped without run(): do not leak the lock
        try:
            self.release()
        except Exception:
            pass


def busy_error(run_dir: str | Path, key: str = "run_dir") -> None:
    """RunDirBusyError when another process holds ``run_dir``'s lock now (a run that is
    starting: its folder is not yet recognisable as a run); else nothing. Only probes:
    the lock file is opened read-only, without following a link, never created."""
    path = Path(run_dir) / LOCK_NAME
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _read_pid(fd)
            who = f"pid {holder}" if holder else "a process that has not written its pid yet"
            raise RunDirBusyError(f"{key}: {run_dir} is in use by another sharpo process "
                                  f"({who}, lock {path})") from None
    finally:
        os.close(fd)


def _read_pid(fd: int) -> int | None:
    try:
        text = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None
