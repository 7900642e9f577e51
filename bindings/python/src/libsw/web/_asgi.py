# SPDX-License-Identifier: Apache-2.0
"""ASGI middleware (Starlette, FastAPI, any ASGI application)."""
from __future__ import annotations

import asyncio
from typing import Any, Awaitable, Callable, Dict, Iterable, List, Mapping, Optional, Tuple

from ._core import custom_response
from ._keys import Request
from ._outcome import (Outcome, ResponseInfo, _asgi_call, _asgi_send, _web_enter,  # type: ignore[attr-defined]
                       _web_fields, _web_install_asgi, pass_fields, refusal)
from ._routes import Middleware, Plan


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
    """A Request of an ASGI http scope. A header of several lines reads as
    their values joined with "," in order, as WSGI servers join them: a
    proxy that adds its own X-Forwarded-For line is read the same way under
    uvicorn and gunicorn."""
    raw = scope.get("headers") or ()
    cache: Dict[str, str] = {}

    def header(name: str) -> Optional[str]:
        if not cache and raw:
            for k, v in raw:
                n = k.decode("latin-1").lower()
                s = v.decode("latin-1")
                cache[n] = cache[n] + "," + s if n in cache else s
        return cache.get(name.lower())

    client = scope.get("client")
    return Request(scope.get("method", "GET"), scope.get("path", "/"), client[0] if client else None, header,
                   params if params is not None else scope.get("path_params"), lambda: _asgi_user(scope), scope)


def encode_headers(headers: Iterable[Tuple[str, str]]) -> List[Tuple[bytes, bytes]]:
    return [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in headers]


def adding_headers(send: Any, wire: Optional[List[Tuple[bytes, bytes]]], seen: Optional[List[Any]] = None) -> Any:
    """send, adding to the response's start the fields of wire it does not
    set; seen receives the response's status and headers."""
    if not wire and seen is None:
        return send

    async def send_with_headers(message: Dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            have = list(message.get("headers", ()))
            if seen is not None:
                seen[:] = [message.get("status", 200), have]
            if wire:
                names = {k.lower() for k, _ in have}
                message = dict(message, headers=have + [(k, v) for k, v in wire if k not in names])
        await send(message)

    return send_with_headers


async def send_refusal(send: Callable[[Dict[str, Any]], Awaitable[None]], status: int,
                       headers: List[Tuple[str, str]], body: bytes) -> None:
    await send({"type": "http.response.start", "status": status,
                "headers": encode_headers(headers)})
    await send({"type": "http.response.body", "body": body})


def _response(seen: Optional[List[Any]]) -> Optional[ResponseInfo]:
    if not seen:
        return None
    return ResponseInfo(int(seen[0]), [(k.decode("latin-1"), v.decode("latin-1")) for k, v in seen[1]])


class RateLimitMiddleware(Middleware):
    """Rate limits in front of an ASGI application (http requests; other
    scope types pass through). ``limits``, ``exempt`` and ``response`` as
    for :class:`WSGIRateLimitMiddleware`, the hook returning an ASGI
    application (a Starlette ``Response`` is one) or ``(status, headers,
    body)``. Pacing and ``wait`` sleep with asyncio.sleep. The outcome is
    in ``scope["state"]["libsw"]`` (Starlette's ``request.state.libsw``).
    With Starlette's AuthenticationMiddleware, add this one after it (so
    that it runs inside it) for the ``user`` key."""

    def __init__(self, app: Any, limiter: Any = None, **kwargs: Any) -> None:
        super().__init__(app, limiter, **kwargs)
        # every request enters one plan (no route or exempt pattern): the class's calls in C
        # (swpy_asgi.c) read (plan, limiter) from here
        self._plain = (self.routes.other[0], self.limiter) if self.routes.plain else None

    def __call__(self, scope: Dict[str, Any], receive: Any, send: Any) -> Awaitable[None]:
        """A request: an awaitable (the application's, ending the request's
        entry when done; a coroutine of this middleware otherwise). A plain
        function, marked as a coroutine function for the servers that ask.
        A call of the middleware runs the same in C (swpy_asgi.c) when
        every request enters one plan with one simple rule."""
        lim = self.limiter
        if scope["type"] != "http" or not lim.enabled:
            return self.app(scope, receive, send)
        routes = self.routes
        m = routes.other if routes.plain else routes.match(scope.get("method", "GET"), scope.get("path", "/"))
        if m is None:
            return self.app(scope, receive, send)
        lim.tick -= 1
        if lim.tick <= 0:
            lim.audit_due()
        plan = m[0]
        rule = plan.single
        get = rule.asgi if rule is not None else None
        if get is None or plan.needs_response:
            return self._call(scope, receive, send, plan, m[1])
        key = get(scope)
        if rule.prefix and key.__class__ is str:
            key = rule.prefix + key
        out = _web_enter(rule, key, plan.rules)  # one rule, one entry, in C
        if out.__class__ is int:
            return self._call(scope, receive, send, plan, m[1], key, out)
        state = scope.get("state")
        if state is None:
            state = scope["state"] = {}
        state["libsw"] = out
        wire = None
        if lim.style:
            wire = _web_fields(rule, lim.style, out.remaining, plan.policy_raw, True)
        try:
            return _asgi_call(self.app(scope, receive, _asgi_send(send, wire) if wire else send), out)
        except BaseException:
            out.release(error=True)
            raise

    __call__._is_coroutine = asyncio.coroutines._is_coroutine  # type: ignore[attr-defined]

    def _call_rc(self, scope: Dict[str, Any], receive: Any, send: Any, plan: Plan, key: Any,
                 rc: int) -> Awaitable[None]:
        """After the C path's entry of plan's rule returned rc (not a pass)."""
        return self._call(scope, receive, send, plan, self.routes.other[1], key, rc)

    async def _call(self, scope: Dict[str, Any], receive: Any, send: Any, plan: Plan, params: Dict[str, Any],
                    key: Any = None, rc: Optional[int] = None) -> None:
        """A request of the general path (rc: the entry of the plan's one
        rule with key returned rc, not a pass)."""
        lim = self.limiter
        if rc is not None:
            out = await lim.finish_one_async(plan.single, key, rc, lambda: asgi_request(scope), plan.rules)
        else:
            out = await lim.enter_async(asgi_request(scope, params), plan.rules)
        state = scope.get("state")
        if state is None:
            state = scope["state"] = {}
        state["libsw"] = out
        if not out.allowed:
            return await self._refused(scope, receive, send, out)
        style = lim.style
        wire = None
        if style and out.rule is not None:
            wire = _web_fields(out.rule, style, out.remaining, plan.policy_raw, True)
            if wire is None:  # a custom clock
                wire = encode_headers(pass_fields(out.rule, lim.headers, max(0, out.remaining or 0), plan.policy))
        seen: Optional[List[Any]] = [] if plan.needs_response else None  # a limit's deduct_when reads the response
        try:
            await self.app(scope, receive, adding_headers(send, wire, seen))
        except BaseException:
            out.release(error=True, response=_response(seen))
            raise
        out.release(response=_response(seen))

    async def _refused(self, scope: Any, receive: Any, send: Any, out: Outcome) -> None:
        extra = out.headers(self.limiter.headers)
        r = custom_response(self.response, asgi_request(scope), out)
        if callable(r):  # an ASGI application (a Starlette Response)
            return await r(scope, receive, adding_headers(send, encode_headers(extra)))
        await send_refusal(send, *refusal(r, extra))


_web_install_asgi(RateLimitMiddleware, Plan)  # its calls in C (swpy_asgi.c)
