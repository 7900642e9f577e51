"""Permit: an admitted (or refused) entry, released once when its work ends."""
from __future__ import annotations

from typing import Any, Type, TypeVar

from ._errors import error_from_code
from ._libsw import lib

_EXIT_ERROR: int = lib.SW_EXIT_ERROR


class Permit:
    """The outcome of :meth:`RateLimiter.acquire` / :meth:`~RateLimiter.try_acquire`.

    True when admitted; then call :meth:`release` once when the work is done
    (or use the permit as a context manager), which records the response
    time, a success, and an exception with ``release(error=True)``. A permit
    that was refused is false and carries ``retry_after`` (seconds)."""

    __slots__ = ("_lim", "n", "admitted", "retry_after", "waited", "remaining", "borrowed",
                 "would_block", "_h", "_t0")

    # Made by admitted() and refused() below: a function setting the slots
    # costs less than a call of the class (type.__call__, then __init__).
    n: int
    admitted: bool
    retry_after: float
    waited: float
    remaining: int
    borrowed: bool
    would_block: bool  #: a dry-run rule admitted this request but would have refused it

    @property
    def limiter(self) -> Any:
        """The limiter entered (a key's: its KeyLimiter)."""
        return self._lim

    def __bool__(self) -> bool:
        return self.admitted

    @property
    def active(self) -> bool:
        """Admitted and not yet released."""
        return self._h is not None

    def release(self, error: bool = False) -> None:
        """End the admitted work (once; later calls do nothing)."""
        h = self._h
        if h is None:
            return
        self._h = None
        self._end(h, _EXIT_ERROR if error else 0)

    def _end(self, h: Any, flags: int) -> None:
        """The C exit of the entry (a limiter's; a keyed permit has its own)."""
        clock = self._lim._clock
        if clock is None:
            rc = lib.swpy_exit(h, self._t0, self.n, flags)
        else:
            rc = lib.swpy_exit_at(h, clock(), self._t0, self.n, flags)
        if rc < 0:
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
            return "<Permit n=%d admitted%s>" % (self.n, "" if self._h is not None else " released")
        return "<Permit n=%d refused retry_after=%g>" % (self.n, self.retry_after)


P = TypeVar("P", bound=Permit)
_new = object.__new__


def admitted(cls: Type[P], limiter: Any, n: int, h: Any, t0: int, remaining: int, waited: float = 0.0,
             borrowed: bool = False, would_block: bool = False) -> P:
    """A permit of an entry admitted at t0 (h: the handle its release exits)."""
    p = _new(cls)
    p._lim = limiter
    p.n = n
    p.admitted = True
    p.retry_after = 0.0
    p.waited = waited
    p.remaining = remaining
    p.borrowed = borrowed
    p.would_block = would_block
    p._h = h
    p._t0 = t0
    return p


def refused(cls: Type[P], limiter: Any, n: int, retry_after: float, remaining: int) -> P:
    """A false permit: retry after retry_after seconds."""
    p = admitted(cls, limiter, n, None, 0, remaining)
    p.admitted = False
    p.retry_after = retry_after
    return p
