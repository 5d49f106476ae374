"""Rendering a chat template that came with a checkpoint: code someone else wrote, run on
every prompt (docs/run_directory.md, "Inputs a checkpoint brings").

transformers renders a template in Jinja's immutable sandbox, so it cannot reach Python's
internals (a sandbox violation is a ``SecurityError``), but a template can still fail
(a syntax error, ``raise_exception('...')``, an undefined name) or loop without end
(nested ``range(99999)`` loops: Jinja caps one range at 100,000 items, not their product).
Here every render is bounded and every failure of the template is one line:

    check_chat_template(tokenizer, key, where)
        when the tokenizer is loaded (models/tokenizer.py): notes the setting ``key`` and
        folder ``where`` it came from and renders a probe conversation, so a broken or
        hostile template is refused before a model is built or an output is made.
    render_chat(tokenizer, messages, **kwargs)
        every later render (rollout prompts, SFT examples):
        ``tokenizer.apply_chat_template(messages, **kwargs)`` within ``TEMPLATE_SECONDS``;
        a failure of the template or its time limit is a UsageError naming the setting and
        the folder.

The time limit is a ``SIGALRM`` timer (Jinja's loops are Python code, so the signal stops
them between two instructions); it only works in the main thread, where every ``sharpo``
command renders. An outer timer (a test's own alarm) is kept and fires when it would have.
"""
from __future__ import annotations

import signal
import threading
import time
import weakref
from contextlib import contextmanager
from typing import Any

from ..errors import UsageError

TEMPLATE_SECONDS = 10.0     # one render; a real template takes milliseconds

# a conversation every chat template renders (no system turn: some families refuse one)
PROBE = [{"role": "user", "content": "u"}, {"role": "assistant", "content": "a"},
         {"role": "user", "content": "u"}]

# tokenizer -> (key, where) of the setting and folder it was loaded from (check_chat_template)
_SOURCES: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


class _TooSlow(BaseException):
    """Raised by the timer inside the template (a BaseException: no ``except Exception``
    in the renderer swallows it)."""


@contextmanager
def _time_limit(seconds: float):
    if threading.current_thread() is not threading.main_thread() or \
            not hasattr(signal, "setitimer"):
        yield
        return
    outer_delay, outer_interval = signal.getitimer(signal.ITIMER_REAL)
    start = time.monotonic()

    def stop(signum, frame):
        if outer_delay and time.monotonic() - start >= outer_delay - 1e-3 and callable(outer):
            return outer(signum, frame)          # the outer timer's own moment
        raise _TooSlow()

    outer = signal.signal(signal.SIGALRM, stop)
    signal.setitimer(signal.ITIMER_REAL, min(seconds, outer_delay) if outer_delay else seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, outer)
        if outer_delay:
            left = outer_delay - (time.monotonic() - start)
            signal.setitimer(signal.ITIMER_REAL, max(left, 1e-3), outer_interval)


def _template_errors() -> tuple:
    import jinja2
    # what a template's own code can raise: Jinja's errors (syntax, sandbox, undefined,
    # raise_exception) and Python's from its expressions ({{ 1 + 'a' }}, {{ 1 // 0 }})
    return (jinja2.TemplateError, TypeError, ValueError, KeyError, AttributeError,
            IndexError, ArithmeticError, MemoryError, RecursionError)


def render_chat(tokenizer, messages: list[dict], **kwargs):
    """``tokenizer.apply_chat_template(messages, **kwargs)``, bounded: UsageError naming
    the setting and folder the tokenizer came from (``check_chat_template``) when the
    template fails or takes over ``TEMPLATE_SECONDS``."""
    key, where = _source(tokenizer)
    of = "" if str(where) == key else f" of {where}"
    try:
        with _time_limit(TEMPLATE_SECONDS):
            return tokenizer.apply_chat_template(messages, **kwargs)
    except _TooSlow:
        raise UsageError(f"{key}: the chat template{of} took over "
                         f"{TEMPLATE_SECONDS:g} s to render one conversation (a loop "
                         f"without end?); refused") from None
    except _template_errors() as exc:
        first = " ".join(str(exc).split())[:300] or type(exc).__name__
        raise UsageError(f"{key}: the chat template{of} fails ({type(exc).__name__}: "
                         f"{first}); refused: give a tokenizer with a working chat "
                         f"template") from None


def _source(tokenizer) -> tuple[str, Any]:
    try:
        return _SOURCES[tokenizer]
    except (KeyError, TypeError):
        return "model.tokenizer_path", "the tokenizer"


def check_chat_template(tokenizer, key: str, where: Any) -> None:
    """Remember where ``tokenizer`` came from (``key``: its setting, ``where``: its
    folder; ``render_chat``'s errors name them) and render ``PROBE`` with and without the
    generation prompt: a template that fails, loops or renders no text is refused when it
    is loaded."""
    try:
        _SOURCES[tokenizer] = (key, where)
    except TypeError:               # not weak-referenceable: errors name the setting only
        pass
    for gen in (True, False):
        text = render_chat(tokenizer, PROBE, tokenize=False, add_generation_prompt=gen)
        if not isinstance(text, str):
            raise UsageError(f"{key}: the chat template of {where} renders "
                             f"{type(text).__name__}, not text; refused")
