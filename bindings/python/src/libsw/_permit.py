"""Permit: an admitted (or refused) entry, released once when its work ends."""
from __future__ import annotations

from typing import Any

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

    def __init__(self, limiter: Any, n: int, admitted: bool, retry_after: float, waited: float,
                 remaining: int, borrowed: bool, h: Any, t0: int, would_block: bool = False) -> None:
        #: a dry-run rule admitted this request but would have refused it
        self.would_block = would_block
        self._lim = limiter
        self.n = n
        self.admitted = admitted
        self.retry_after = retry_after
        self.waited = waited
        self.remaining = remaining
        self.borrowed = borrowed
        self._h = h
        self._t0 = t0

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
