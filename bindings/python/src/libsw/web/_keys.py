# SPDX-License-Identifier: Apache-2.0
"""Key functions: which client a request counts for.

A key function takes a :class:`Request` (the framework's request seen
through one small interface) and returns the key, or ``None``: the rule
does not apply to this request (e.g. :func:`user` for an anonymous
request, without a fallback). A key may be of any type a framework gives
(str, bytes, int, UUID, ...): :func:`normalize_key` makes it a str or bytes
the keyed table takes.

The built-in key functions also read the native request directly
(``wsgi(environ)``, ``asgi(scope)``) when they can: the adapters' fast
paths use that and skip the Request.
"""
from __future__ import annotations

import hashlib
import importlib
import ipaddress
from typing import Any, Callable, Iterable, List, Mapping, Optional, Sequence, Union

KeyFunc = Callable[["Request"], Any]
_Net = Union[ipaddress.IPv4Network, ipaddress.IPv6Network]
_Ip = Union[ipaddress.IPv4Address, ipaddress.IPv6Address]

KEY_MAX = 65535  # bytes of a key the keyed table takes; a longer one is digested
ANONYMOUS = "-"  # the key of a request whose peer is unknown (remote_address)


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
        """A request header's value, case-insensitive: all its lines joined
        with "," in order (as WSGI servers join them), or None."""
        h = self._headers
        return h(name) if callable(h) else h.get(name.lower())

    def user(self) -> Optional[str]:
        """The authenticated user's key, or None (anonymous)."""
        u = self._user
        return u() if callable(u) else u


# ---------------------------------------------------------------- keys


def normalize_key(key: Any) -> Union[str, bytes, None]:
    """A key the keyed table takes: None stays None (the rule does not
    apply); str and bytes as they are, anything else (int, UUID, ...) its
    str(); empty, the anonymous key; over KEY_MAX bytes, its digest."""
    t = key.__class__
    if t is not str and t is not bytes:
        if key is None:
            return None
        key = bytes(key) if isinstance(key, bytes) else str(key)
    if not key:
        return ANONYMOUS
    if len(key) > KEY_MAX // 4:  # (a str of up to KEY_MAX / 4 characters fits in UTF-8)
        kb = key if isinstance(key, bytes) else key.encode("utf-8", "surrogateescape")
        if len(kb) > KEY_MAX:
            return "digest:" + hashlib.blake2b(kb, digest_size=16).hexdigest()
    return key


# ------------------------------------------------------- forwarding headers


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


def parse_ip(text: str) -> Optional[_Ip]:
    """The address of a hop as proxies write it: ``1.2.3.4``, ``1.2.3.4:80``,
    ``2001:db8::1``, ``[2001:db8::1]:80``, quoted (Forwarded), a zone
    (``fe80::1%eth0``); an IPv4-mapped IPv6 address is its IPv4 address, so
    that one client has one key. None when it is not an address (an
    obfuscated identifier, ``unknown``, garbage)."""
    text = text.strip().strip('"').strip()
    if text.startswith("["):  # [v6] or [v6]:port
        end = text.find("]")
        if end < 0:
            return None
        text = text[1:end]
    elif text.count(":") == 1:  # v4:port
        text = text.split(":", 1)[0]
    text = text.split("%", 1)[0]  # a zone names the link, not the client
    try:
        ip = ipaddress.ip_address(text)
    except ValueError:
        return None
    if ip.version == 6 and ip.ipv4_mapped is not None:  # type: ignore[union-attr]
        return ip.ipv4_mapped  # type: ignore[union-attr]
    return ip


def _split_quoted(value: str, sep: str) -> List[str]:
    """value split at sep outside quoted strings (RFC 7230 quoted-string,
    backslash escapes)."""
    out, cur, quoted, i = [], [], False, 0
    while i < len(value):
        c = value[i]
        if quoted and c == "\\" and i + 1 < len(value):
            cur.append(value[i:i + 2])
            i += 2
            continue
        if c == '"':
            quoted = not quoted
        elif c == sep and not quoted:
            out.append("".join(cur))
            cur = []
            i += 1
            continue
        cur.append(c)
        i += 1
    out.append("".join(cur))
    return out


def forwarded_for(value: str) -> List[str]:
    """The for= values of a Forwarded header (RFC 7239), in order, one per
    element (an element without for= gives "" : not an address)."""
    out = []
    for element in _split_quoted(value, ","):
        if not element.strip():
            continue
        got = ""
        for pair in _split_quoted(element, ";"):
            k, _, v = pair.strip().partition("=")
            if k.strip().lower() == "for":
                got = v.strip()
        out.append(got)
    return out


class remote_address:
    """The client's address: the TCP peer's, or, when the peer is one of
    ``trusted_proxies`` (addresses or networks), the right-most address of
    ``header`` (``"X-Forwarded-For"`` or ``"Forwarded"``, all its lines
    joined in order) that is not itself a trusted proxy. With no trusted
    proxies (the default) the header is never read: a client cannot choose
    its key. A request with no peer (a Unix socket) has the key "-"."""

    name = "remote_address"

    def __init__(self, trusted_proxies: Union[str, Iterable[str], None] = None,
                 header: str = "X-Forwarded-For") -> None:
        if not isinstance(header, str) or header.lower() not in ("x-forwarded-for", "forwarded"):
            raise ValueError("remote_address(header=%r): one of 'X-Forwarded-For', 'Forwarded'" % (header,))
        self.trusted = _networks(trusted_proxies)
        self.header = header
        self._forwarded = header.lower() == "forwarded"
        if not self.trusted:  # the adapters' fast paths: the peer, read from the native request
            self.wsgi = self._wsgi_peer
            self.asgi = self._asgi_peer
            self.wsgi_env, self.wsgi_missing = "REMOTE_ADDR", ANONYMOUS
            self.asgi_client = True  # (_asgi_peer's: read in C by the ASGI middleware)

    @staticmethod
    def _wsgi_peer(environ: Mapping[str, Any]) -> str:
        return environ.get("REMOTE_ADDR") or ANONYMOUS

    @staticmethod
    def _asgi_peer(scope: Mapping[str, Any]) -> str:
        client = scope.get("client")
        return client[0] if client else ANONYMOUS

    def _is_trusted(self, ip: Optional[_Ip]) -> bool:
        return ip is not None and any(ip in n for n in self.trusted)

    def __call__(self, req: Request) -> Optional[str]:
        peer = req.peer or ANONYMOUS
        if not self.trusted or not self._is_trusted(parse_ip(peer)):
            return peer
        value = req.header(self.header)
        if not value:
            return peer
        hops = forwarded_for(value) if self._forwarded else value.split(",")
        for hop in reversed(hops):  # the nearest first: a client can only prepend
            ip = parse_ip(hop)
            if ip is None:
                return peer  # an obfuscated or garbled hop: stop trusting the chain
            if not self._is_trusted(ip):
                return str(ip)
        return peer

    def __repr__(self) -> str:
        return "remote_address(trusted_proxies=%r, header=%r)" % ([str(n) for n in self.trusted], self.header)


# ------------------------------------------------------------- the others


class header:
    """The value of a request header (an API key, a tenant id; all its
    lines joined with ","); a request without it is not limited by the rule
    unless ``fallback`` (another key function) gives a key."""

    def __init__(self, name: str, fallback: Optional[KeyFunc] = None) -> None:
        if not isinstance(name, str) or not name:
            raise ValueError("header(name=%r): a header name" % (name,))
        self.name = "header:" + name
        self.header = name
        self.fallback = fallback
        if fallback is None:  # the adapters' fast paths
            env = "HTTP_" + name.upper().replace("-", "_")
            raw = name.lower().encode("latin-1")
            self.wsgi = lambda environ: environ.get(env) or None
            self.asgi = lambda scope: asgi_header(scope, raw)
            self.wsgi_env, self.wsgi_missing = env, None

    def __call__(self, req: Request) -> Optional[str]:
        v = req.header(self.header)
        if v:
            return v
        return self.fallback(req) if self.fallback is not None else None


def asgi_header(scope: Mapping[str, Any], name: bytes) -> Optional[str]:
    """The lines of header name (lower-case bytes) of an ASGI scope joined
    with "," in order, or None."""
    got = [v for k, v in scope.get("headers") or () if k.lower() == name]
    if not got:
        return None
    return (got[0] if len(got) == 1 else b",".join(got)).decode("latin-1") or None


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
            return "user:%s" % (u,)
        return self.fallback(req) if self.fallback is not None else None


def global_key(req: Request) -> str:
    """One key for every request: the rule limits the route as a whole."""
    return "*"


global_key.name = "global"  # type: ignore[attr-defined]
global_key.wsgi = global_key.asgi = lambda native: "*"  # type: ignore[attr-defined]
global_key.wsgi_env, global_key.wsgi_missing = "", "*"  # type: ignore[attr-defined]


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
