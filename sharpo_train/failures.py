"""How a command fails (docs/run_directory.md, "When a command fails"): one line on stderr,
a non-zero exit status, and what was kept. cli.py hands every exception a command raises
to ``report``:

- a user error (UsageError, a missing or existing file, a bad file): exit 2;
- the disk is full or a file would pass the size limit (ENOSPC, EDQUOT, EFBIG: ``ulimit
  -f``; safetensors' IoError of the same codes): exit 1, "disk full";
- any other error of the operating system (permission denied, I/O error, ...): exit 1;
- a signal (Ctrl-C: SIGINT; SIGTERM, SIGHUP): exit 128 + its number, "interrupted".

The line ends with what was kept: what the command in progress said with ``keep`` (the
trainer: its run directory and how to resume it), else that nothing written before was
changed (every file sharpo writes goes to a temporary name first and is renamed into
place). Anything else is a bug and keeps its traceback.
"""
from __future__ import annotations

import errno
import re
import signal
import sys
from contextlib import contextmanager

from .errors import UsageError

USER_ERRORS = (UsageError, FileNotFoundError, FileExistsError, NotADirectoryError,
               IsADirectoryError, UnicodeDecodeError)

_DISK_FULL = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)
# what safetensors (Rust) and torch say for the same errors
_DISK_FULL_TEXT = re.compile(r"No space left on device|Disk quota exceeded|File too large|"
                             r"code: (28|122|27)\b|StorageFull|FileTooLarge", re.I)

DEFAULT_KEPT = ("nothing written before was changed (sharpo writes every file to a "
                "temporary name and renames it into place)")

_kept: list[str] = []


class Interrupted(BaseException):
    """A signal (SIGTERM, SIGHUP) turned into an exception, so that cleanup code runs."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def keep(text: str) -> None:
    """What a failure from now on leaves behind (said on the error line)."""
    if _kept:
        _kept[-1] = text
    else:
        _kept.append(text)


def kept() -> str:
    return _kept[-1] if _kept else DEFAULT_KEPT


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    if isinstance(exc, OSError) and exc.filename is not None and exc.strerror:
        text = f"{exc.filename}: {exc.strerror}"      # not "[Errno 2] ..."
    elif isinstance(exc, OSError) and exc.strerror:
        text = exc.strerror
    return text or type(exc).__name__


def disk_full(exc: BaseException) -> bool:
    if isinstance(exc, OSError) and exc.errno in _DISK_FULL:
        return True
    return (type(exc).__name__ == "SafetensorError" or isinstance(exc, RuntimeError)) and \
        bool(_DISK_FULL_TEXT.search(str(exc)))


def report(command: str, exc: BaseException) -> int | None:
    """Print ``exc`` as the one line of a failed ``sharpo command``; -> the exit status,
    or None when ``exc`` is a bug (the caller re-raises it: a traceback)."""
    head = f"sharpo {command}: error:"
    if isinstance(exc, (KeyboardInterrupt, Interrupted)):
        signum = getattr(exc, "signum", signal.SIGINT)
        print(f"sharpo {command}: interrupted ({signal.Signals(signum).name}); {kept()}",
              file=sys.stderr)
        return 128 + int(signum)
    if disk_full(exc):
        print(f"{head} disk full ({_one_line(exc)[:300]}); {kept()}", file=sys.stderr)
        return 1
    if isinstance(exc, USER_ERRORS):
        print(f"{head} {_one_line(exc)}", file=sys.stderr)
        return 2
    if isinstance(exc, OSError):
        print(f"{head} {_one_line(exc)[:300]}; {kept()}", file=sys.stderr)
        return 1
    return None


def _raise_interrupted(signum, _frame):
    raise Interrupted(signum)


@contextmanager
def signals_as_exceptions():
    """SIGTERM and SIGHUP raise ``Interrupted`` in the main thread while the block runs
    (SIGINT already raises KeyboardInterrupt), so ``finally`` blocks and the run's cleanup
    run; the previous handlers come back afterwards. The list of kept things is reset."""
    import threading
    _kept.clear()
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    old = {s: signal.signal(s, _raise_interrupted) for s in (signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for s, h in old.items():
            signal.signal(s, h)
        _kept.clear()
