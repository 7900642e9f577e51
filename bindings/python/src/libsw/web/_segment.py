# SPDX-License-Identifier: Apache-2.0
"""Where a web application's limits live: the default segment's name, and
``reset=`` once per deployment.

The default name is made from the user, the application's name and the
application's absolute path (hashed): the workers of one application
share it, two applications of one user do not, even with the same import
name (every ``app.py``).

``reset=True`` starts the counts from zero once per deployment, never once
per worker: the first process of a deployment to open the limits removes
the segment and its tables (under a lock) and writes the deployment's mark
beside them; the other workers of that deployment find the mark and keep
the tables. A deployment is the process group the worker runs in (a
gunicorn or uvicorn master and its workers; a command run from a shell),
named by its leader's process id and start time; ``reset="<id>"`` names
it instead (e.g. a release's version).
"""
from __future__ import annotations

import fcntl
import hashlib
import inspect
import os
import re
import sys
from typing import Any, List, Optional

from .._errors import check
from .._keyed import keys_segments
from .._libsw import lib

_NAME_MAX = 40  # a segment name leaving room for ".keys.<rule>" in 63 bytes


def default_segment(app_name: str = "app", app_path: Optional[str] = None) -> str:
    """``"libsw-web-<uid>-<app>-<hash>"``: <app> is app_name with characters
    other than letters, digits, '_', '-' and '.' dropped, cut so that the
    name fits 40 bytes; <hash>, 8 hex digits of the application's absolute
    path (app_path; without one, of the current directory)."""
    path = os.path.abspath(app_path if app_path else os.getcwd())
    digest = hashlib.blake2b(path.encode("utf-8", "surrogateescape"), digest_size=4).hexdigest()
    head = "libsw-web-%d-" % os.getuid()
    room = max(1, _NAME_MAX - len(head) - 1 - len(digest))
    slug = re.sub(r"[^A-Za-z0-9_.-]", "", app_name or "app")[:room] or "app"
    return "%s%s-%s" % (head, slug, digest)


def module_path(module: Any) -> Optional[str]:
    """The file of a module, by name (imported or not), if it has one."""
    import importlib.util

    mod = sys.modules.get(module)
    f = getattr(mod, "__file__", None)
    if f is None:
        try:
            spec = importlib.util.find_spec(module)
        except (ImportError, ValueError):
            spec = None
        f = getattr(spec, "origin", None)
    return os.path.abspath(f) if isinstance(f, str) and os.path.isabs(os.path.abspath(f)) else None


def _library_dirs() -> List[str]:
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # the libsw package
    out = [here + os.sep]
    for p in sys.path:
        if p and os.path.basename(p.rstrip(os.sep)) in ("site-packages", "dist-packages"):
            out.append(os.path.abspath(p) + os.sep)
    out.append(os.path.dirname(os.__file__) + os.sep)  # the standard library
    return out


def app_path(app: Any = None) -> str:
    """The application's absolute path, which the default segment name is
    made from: a Flask application's root path and import name; a function
    or class's module file; else the file of the innermost caller that is
    not a library (site-packages, dist-packages, the standard library,
    libsw): the module that made the limits; else the current directory."""
    root = getattr(app, "root_path", None)
    if isinstance(root, str) and isinstance(getattr(app, "import_name", None), str):
        return os.path.join(root, app.import_name)
    if app is not None and (inspect.isfunction(app) or inspect.isclass(app)):
        found = module_path(app.__module__)
        if found:
            return found
    skip = _library_dirs()
    frame = sys._getframe(1)
    while frame is not None:
        f = frame.f_code.co_filename
        if not f.startswith("<") and not any(os.path.abspath(f).startswith(d) for d in skip):
            return os.path.abspath(f)
        frame = frame.f_back  # type: ignore[assignment]
    return os.getcwd()


# ------------------------------------------------------------------ reset


def deployment() -> str:
    """This process's deployment: its process group's leader, as its id and
    start time (a leader that is gone: the group id alone)."""
    pgid = os.getpgid(0)
    try:
        with open("/proc/%d/stat" % pgid, "rb") as f:
            stat = f.read()
        start = stat[stat.rindex(b")") + 2:].split()[19].decode()  # field 22: start time
    except (OSError, ValueError, IndexError):
        start = "?"
    return "pgid %d started %s" % (pgid, start)


def _mark_path(segment: str) -> str:
    return segment + ".reset" if "/" in segment else "/dev/shm/%s.reset" % segment


def segments_of(segment: str) -> List[str]:
    """The segment and those of its other window geometries
    ("<segment>-w<windows>"); unlink_segment removes each with its keys'
    segments."""
    folder, base = (os.path.split(segment) if "/" in segment else ("/dev/shm", segment))
    try:
        names = os.listdir(folder or "/")
    except OSError:
        names = []
    others = [n for n in names if re.fullmatch(re.escape(base) + r"-w\d+", n)]
    return [segment] + [os.path.join(folder, n) if "/" in segment else n for n in sorted(others)]


def reset_once(segment: str, reset: Any) -> bool:
    """Remove the segment and its tables if this deployment has not done so
    yet (reset: True, or a deployment id); True when this call did."""
    ident = deployment() if reset is True else "id %s" % (reset,)
    mark = _mark_path(segment)
    fd = os.open(mark, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # one process of the deployment resets; the others wait, then see the mark
        seen = os.pread(fd, 4096, 0).decode("utf-8", "replace")
        if seen == ident:
            return False
        for name in segments_of(segment):  # (not libsw.unlink_segment: it removes this mark too)
            seg = name.encode("utf-8", "surrogateescape")
            for n in [seg] + keys_segments(seg):
                check(lib.sw_segment_unlink(n), "reset %s" % segment)
        os.ftruncate(fd, 0)
        os.pwrite(fd, ident.encode(), 0)
        return True
    finally:
        os.close(fd)  # (and the lock with it)
