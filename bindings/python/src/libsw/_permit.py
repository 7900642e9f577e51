# SPDX-License-Identifier: Apache-2.0
"""Permit: an admitted (or refused) entry, released once when its work ends.

An admitted permit of a limiter holds a token (swpy.h): one integer naming
the C record of its entry (limiter, start, units, remaining), which
release() ends once, from any thread, with one C call of that integer.
"""
from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, Type, TypeVar

from ._errors import error_from_code
from ._libsw import lib

_EXIT_ERROR: int = lib.SW_EXIT_ERROR
_STALE: int = lib.SWPY_STALE
_exit_at = lib.swpy_exit_token_at
_cancel = lib.swpy_cancel
_token_remaining = lib.swpy_token_remaining


class Permit:
    """The outcome of :meth:`RateLimiter.acquire` / :meth:`~RateLimiter.try_acquire`.

    True when admitted; then call :meth:`release` once when the work is done
    (or use the permit as a context manager), which records the response
    time, a success, and an exception with ``release(error=True)``. A permit
    that was refused is false and carries ``retry_after`` (seconds)."""

    __slots__ = ("_lim", "n", "_tok", "_rem")

    # A permit admitted at once (the fast path) sets only the slots above
    # and takes these values from the class; other outcomes are _Outcome's,
    # whose slots hold their own.
    admitted: bool = True
    retry_after: float = 0.0
    waited: float = 0.0
    borrowed: bool = False
    would_block: bool = False  #: a dry-run rule admitted this request but would have refused it
    n: int

    @property
    def limiter(self) -> Any:
        """The limiter entered (a key's: its KeyLimiter)."""
        return self._lim

    @property
    def remaining(self) -> int:
        """Units still admissible right after this entry."""
        tok = self._tok
        if tok:
            r = _token_remaining(tok)  # the entry's record, until it is reused
            if r >= 0:
                return r
        while True:  # released: release() stores it right after its C call
            try:
                return self._rem
            except AttributeError:
                time.sleep(0)

    @property
    def active(self) -> bool:
        """Admitted and not yet released."""
        return self._tok != 0

    if TYPE_CHECKING:

        def release(self, error: bool = False) -> None:
            """End the admitted work (once; later calls do nothing). A C
            method (swpy_py.c): one C call ends the token's entry; the
            remaining count goes to _rem, 0 to _tok."""

    def cancel(self) -> None:
        """Give back what this admitted entry counted — its passes, its
        place in flight or in a pacing queue — as if it had never been
        admitted (all or nothing across several limits: cancel those that
        admitted when one refuses). It ends the entry (no release follows);
        once, and after a release it does nothing. NotSupportedError while
        the C library has no cancel (the entry is then released)."""
        tok = self._tok
        if not tok:
            return
        self._rem = max(_token_remaining(tok), 0)
        self._tok = 0
        clock = getattr(self._lim, "_clock", None)  # (a custom clock's time: the record uses it if it needs one)
        rc = _cancel(tok, clock() if clock is not None else -1)
        if rc < 0 and rc != _STALE:
            raise error_from_code(rc, "cancel")

    def _failed(self, tok: int, rc: int) -> None:
        """A release whose C exit did not end the entry: another thread
        released it first (which stores what follows), or the exit failed."""
        if rc == _STALE:
            return
        self._rem = max(_token_remaining(tok), 0)
        self._tok = 0
        raise error_from_code(rc, "release")

    def __enter__(self) -> "Permit":
        return self

    def __exit__(self, et: Any, ev: Any, tb: Any) -> None:
        self.release(error=et is not None)

    async def __aenter__(self) -> "Permit":
        return self

    async def __aexit__(self, et: Any, ev: Any, tb: Any) -> None:
        self.release(error=et is not None)

    def __repr__(self) -> str:
        if self.admitted:
            return "<Permit n=%d admitted%s>" % (self.n, "" if self.active else " released")
        return "<Permit n=%d refused retry_after=%g>" % (self.n, self.retry_after)


class _Outcome(Permit):
    """A permit that waited, borrowed, would have blocked, or was refused
    (false); or one of a limiter with a custom clock."""

    __slots__ = ("admitted", "retry_after", "waited", "borrowed", "would_block")

    def __bool__(self) -> bool:
        return self.admitted


class _ClockPermit(_Outcome):
    """A permit of a limiter with clock=: its release passes that clock's time."""

    __slots__ = ()

    def release(self, error: bool = False) -> None:
        tok = self._tok
        if tok:
            rem = _exit_at(tok, self._lim._clock(), _EXIT_ERROR if error else 0)
            if rem < 0:
                return self._failed(tok, rem)
            self._rem = rem
            self._tok = 0


P = TypeVar("P", bound=Permit)


def admitted(cls: Type[P], limiter: Any, n: int, tok: int, remaining: int, waited: float = 0.0,
             borrowed: bool = False, would_block: bool = False) -> P:
    """A permit (of an _Outcome class) of an entry admitted with token tok
    (0: none, a subclass ends the entry its own way)."""
    p = cls()  # (no __init__: the class's call is the cheapest way to a new object)
    p._lim = limiter
    p.n = n
    p._tok = tok
    p._rem = remaining
    p.admitted = True
    p.retry_after = 0.0
    p.waited = waited
    p.borrowed = borrowed
    p.would_block = would_block
    return p


def refused(cls: Type[P], limiter: Any, n: int, retry_after: float, remaining: int) -> P:
    """A false permit: retry after retry_after seconds."""
    p = admitted(cls, limiter, n, 0, remaining)
    p.admitted = False
    p.retry_after = retry_after
    return p
