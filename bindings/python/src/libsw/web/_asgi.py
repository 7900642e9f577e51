# SPDX-License-Identifier: Apache-2.0
"""ASGI middleware (Starlette, FastAPI, any ASGI application)."""
from __future__ import annotations

from typing import Any, Awaitable, Callable, Dict, Iterable, List, Mapping, Optional, Tuple

from ._core import Outcome, custom_response, refusal
from ._keys import Request
from ._routes import Middleware


def _asgi_user(scope: Mapping[str, Any]) -> Optional[str]:
    """Starlette's scope["user"] (AuthenticationMiddleware), when authenticated."""
    u = scope.get("user")
    if u is None or not getattr(u, "is_authenticated", False):
        return None
    for attr in ("identity", "username", "display_name"):  # BaseUser.identity may raise NotImplementedError
        try:
            ident = getattr(u, attr, None)
        except Exception:
            continue
        if ident:
            return str(ident)
    return None


def asgi_request(scope: Mapping[str, Any], params: Optional[Mapping[str, Any]] = None) -> Request:
    """A Request of an ASGI http scope."""
    raw = scope.get("headers") or ()
    cache: Dict[str, str] = {}

    def header(name: str) -> Optional[str]:
        if not cache and raw:
            for k, v in raw:
                cache.setdefault(k.decode("latin-1").lower(), v.decode("latin-1"))
        return cache.get(name.lower())

    client = scope.get("client")
    return Request(scope.get("method", "GET"), scope.get("path", "/"), client[0] if client else None, header,
                   params if params is not None else scope.get("path_params"), lambda: _asgi_user(scope), scope)


def encode_headers(headers: Iterable[Tuple[str, str]]) -> List[Tuple[bytes, bytes]]:
    return [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in headers]


def adding_headers(send: Any, wire: List[Tuple[bytes, bytes]]) -> Any:
    """send, adding to the response's start the fields of wire it does not set."""
    if not wire:
        return send

    async def send_with_headers(message: Dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            have = {k.lower() for k, _ in message.get("headers", ())}
            message = dict(message, headers=list(message.get("headers", ())) +
                           [(k, v) for k, v in wire if k not in have])
        await send(message)

    return send_with_headers


async def send_refusal(send: Callable[[Dict[str, Any]], Awaitable[None]], status: int,
                       headers: List[Tuple[str, str]], body: bytes) -> None:
    await send({"type": "http.response.start", "status": status,
                "headers": encode_headers(headers)})
    await send({"type": "http.response.body", "body": body})


class RateLimitMiddleware(Middleware):
    """Rate limits in front of an ASGI application (http requests; other
    scope types pass through). ``limits``, ``exempt`` and ``response`` as
    for :class:`WSGIRateLimitMiddleware`, the hook returning an ASGI
    application (a Starlette ``Response`` is one) or ``(status, headers,
    body)``. Pacing and ``wait`` sleep with asyncio.sleep. The outcome is
    in ``scope["state"]["libsw"]`` (Starlette's ``request.state.libsw``).
    With Starlette's AuthenticationMiddleware, add this one after it (so
    that it runs inside it) for the ``user`` key."""

    async def __call__(self, scope: Dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        m = self.routes.match(scope.get("method", "GET"), scope.get("path", "/"))
        if m is None:
            return await self.app(scope, receive, send)
        req = asgi_request(scope, m[1])
        out = await self.limiter.enter_async(req, *m[0])
        scope.setdefault("state", {})["libsw"] = out
        extra = out.headers(self.limiter.headers)
        if not out.allowed:
            return await self._refused(scope, receive, send, req, out, extra)
        try:
            await self.app(scope, receive, adding_headers(send, encode_headers(extra)))
        except BaseException:
            out.release(error=True)
            raise
        out.release()

    async def _refused(self, scope: Any, receive: Any, send: Any, req: Request, out: Outcome,
                       extra: List[Tuple[str, str]]) -> None:
        r = custom_response(self.response, req, out)
        if callable(r):  # an ASGI application (a Starlette Response)
            return await r(scope, receive, adding_headers(send, encode_headers(extra)))
        await send_refusal(send, *refusal(r, extra))
