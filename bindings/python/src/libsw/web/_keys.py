# SPDX-License-Identifier: Apache-2.0
"""Key functions: which client a request counts for.

A key function takes a :class:`Request` (the framework's request seen
through one small interface) and returns the key (``str``), or ``None``:
the rule does not apply to this request (e.g. :func:`user` for an
anonymous request, without a fallback).
"""
from __future__ import annotations

import importlib
import ipaddress
from typing import Any, Callable, Iterable, List, Mapping, Optional, Sequence, Union

KeyFunc = Callable[["Request"], Optional[str]]
_Net = Union[ipaddress.IPv4Network, ipaddress.IPv6Network]


class Request:
    """What key functions see of a request. The adapters fill it from
    their framework's request (``native``); attributes are read lazily."""

    __slots__ = ("method", "path", "peer", "_headers", "path_params", "_user", "native")

    def __init__(self, method: str, path: str, peer: Optional[str], headers: Any,
                 path_params: Optional[Mapping[str, Any]] = None, user: Any = None, native: Any = None) -> None:
        self.method = method
        self.path = path
        self.peer = peer  #: the address of the TCP peer (REMOTE_ADDR, scope["client"])
        self._headers = headers  # a callable name -> value, or a mapping of lower-case names
        self.path_params = path_params if path_params is not None else {}
        self._user = user  # a callable returning the user's key (or None), or the key
        self.native = native  #: the framework's request (WSGI environ, ASGI scope, ...)

    def header(self, name: str) -> Optional[str]:
        """A request header's value (the first, case-insensitive), or None."""
        h = self._headers
        return h(name) if callable(h) else h.get(name.lower())

    def user(self) -> Optional[str]:
        """The authenticated user's key, or None (anonymous)."""
        u = self._user
        return u() if callable(u) else u


# ------------------------------------------------------------- built-ins


def _networks(trusted: Union[str, Iterable[str], None]) -> List[_Net]:
    if trusted is None:
        return []
    if isinstance(trusted, str):
        trusted = [trusted]
    out = []
    for t in trusted:
        try:
            out.append(ipaddress.ip_network(t, strict=False))
        except (ValueError, TypeError):
            raise ValueError("trusted_proxies: %r is not an address or network (e.g. '10.0.0.0/8')" % (t,)) from None
    return out


def _parse_ip(text: str) -> Optional[Any]:
    text = text.strip().strip('"')
    if text.startswith("["):  # [v6] or [v6]:port
        text = text[1:text.find("]")] if "]" in text else text[1:]
    elif text.count(":") == 1:  # v4:port
        text = text.split(":", 1)[0]
    try:
        return ipaddress.ip_address(text)
    except ValueError:
        return None


def _forwarded_for(value: str) -> List[str]:
    """The for= values of a Forwarded header (RFC 7239), in order."""
    out = []
    for element in value.split(","):
        for pair in element.split(";"):
            k, _, v = pair.strip().partition("=")
            if k.strip().lower() == "for":
                out.append(v.strip())
    return out


class remote_address:
    """The client's address: the TCP peer's, or, when the peer is one of
    ``trusted_proxies`` (addresses or networks), the last address of
    ``header`` (``"X-Forwarded-For"`` or ``"Forwarded"``) that is not
    itself a trusted proxy. With no trusted proxies (the default) the
    header is never read: a client cannot choose its key."""

    name = "remote_address"

    def __init__(self, trusted_proxies: Union[str, Iterable[str], None] = None,
                 header: str = "X-Forwarded-For") -> None:
        if not isinstance(header, str) or header.lower() not in ("x-forwarded-for", "forwarded"):
            raise ValueError("remote_address(header=%r): one of 'X-Forwarded-For', 'Forwarded'" % (header,))
        self.trusted = _networks(trusted_proxies)
        self.header = header

    def _is_trusted(self, ip: Any) -> bool:
        return ip is not None and any(ip in n for n in self.trusted)

    def __call__(self, req: Request) -> Optional[str]:
        peer = req.peer
        if not self.trusted or not self._is_trusted(_parse_ip(peer or "")):
            return peer or None
        value = req.header(self.header)
        if not value:
            return peer
        hops = _forwarded_for(value) if self.header.lower() == "forwarded" else value.split(",")
        for hop in reversed(hops):  # the nearest first: a client can only prepend
            ip = _parse_ip(hop)
            if ip is None:
                return peer  # an obfuscated or garbled hop: stop trusting the chain
            if not self._is_trusted(ip):
                return str(ip)
        return peer

    def __repr__(self) -> str:
        return "remote_address(trusted_proxies=%r, header=%r)" % ([str(n) for n in self.trusted], self.header)


class header:
    """The value of a request header (an API key, a tenant id); a request
    without it is not limited by the rule unless ``fallback`` (another key
    function) gives a key."""

    def __init__(self, name: str, fallback: Optional[KeyFunc] = None) -> None:
        if not isinstance(name, str) or not name:
            raise ValueError("header(name=%r): a header name" % (name,))
        self.name = "header:" + name
        self.header = name
        self.fallback = fallback

    def __call__(self, req: Request) -> Optional[str]:
        v = req.header(self.header)
        if v:
            return v
        return self.fallback(req) if self.fallback is not None else None


class path_param:
    """A path parameter of the route (``/orgs/<org>`` in Flask, ``{org}`` in
    FastAPI and the ASGI/WSGI middleware's patterns, a URL kwarg in
    Django)."""

    def __init__(self, name: str) -> None:
        if not isinstance(name, str) or not name:
            raise ValueError("path_param(name=%r): a parameter name" % (name,))
        self.name = "path:" + name
        self.param = name

    def __call__(self, req: Request) -> Optional[str]:
        v = req.path_params.get(self.param)
        return None if v is None else str(v)


class user:
    """The authenticated user (Django's ``request.user``, Starlette's
    ``scope["user"]``, Flask's ``g.user`` or HTTP authorization, WSGI's
    ``REMOTE_USER``); for an anonymous request, ``fallback``'s key (e.g.
    ``remote_address()``), or None: the rule does not apply."""

    name = "user"

    def __init__(self, fallback: Optional[KeyFunc] = None) -> None:
        self.fallback = fallback

    def __call__(self, req: Request) -> Optional[str]:
        u = req.user()
        if u is not None:
            return "user:" + u
        return self.fallback(req) if self.fallback is not None else None


def global_key(req: Request) -> str:
    """One key for every request: the rule limits the route as a whole."""
    return "*"


global_key.name = "global"  # type: ignore[attr-defined]


def key_function(spec: Any, trusted_proxies: Optional[Sequence[str]] = None) -> KeyFunc:
    """A key function from what a user wrote: a callable, or a name:
    ``"ip"`` / ``"remote_address"``, ``"user"``, ``"user_or_ip"``,
    ``"global"``, ``"header:NAME"``, ``"path:NAME"``, or the dotted path of a
    callable (``"myapp.keys.tenant"``). ValueError naming anything else."""
    if callable(spec):
        return spec
    if not isinstance(spec, str):
        raise TypeError("key must be a callable or a name like 'ip', not %s" % type(spec).__name__)
    if spec in ("ip", "remote_address", "remote_addr"):
        return remote_address(trusted_proxies)
    if spec == "user_or_ip":
        return user(fallback=remote_address(trusted_proxies))
    if spec == "user":
        return user()
    if spec == "global":
        return global_key
    kind, sep, arg = spec.partition(":")
    if sep and kind == "header":
        return header(arg)
    if sep and kind == "path":
        return path_param(arg)
    mod, dot, attr = spec.rpartition(".")
    if dot and mod:
        try:
            fn = getattr(importlib.import_module(mod), attr)
        except (ImportError, AttributeError) as e:
            raise ValueError("key %r: cannot import it (%s)" % (spec, e)) from None
        if callable(fn):
            return fn
    raise ValueError("key %r is not a key function: one of 'ip', 'user', 'user_or_ip', 'global', "
                     "'header:NAME', 'path:NAME', a dotted path to a callable, or a callable" % (spec,))


def key_name(fn: KeyFunc) -> str:
    """A name for a key function in logs and statistics."""
    return getattr(fn, "name", None) or getattr(fn, "__qualname__", None) or type(fn).__name__
