# SPDX-License-Identifier: Apache-2.0
"""libsw.web at start-up: every rule, table and segment of a configuration
is made when the application starts (init_app, a middleware's
constructor, Django's middleware), so a bad setting — or a /dev/shm too
small for the tables — stops it with a clear message; reset= is once per
deployment, never once per worker; the default segment is the
application's own (its absolute path), never shared by two applications."""
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import uuid

import pytest

import libsw
from libsw.web import Limiter, WSGIRateLimitMiddleware, default_segment


def hello(environ, start_response):
    start_response("200 OK", [])
    return [b"ok"]


def keys_tables(folder, seg):
    return sorted(f for f in os.listdir(folder) if f.startswith(seg + ".keys."))


@pytest.fixture
def folder():
    d = tempfile.mkdtemp(prefix="lswt-start-")
    yield d
    shutil.rmtree(d, ignore_errors=True)


def run(code, timeout=120):
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          timeout=timeout)


# ------------------------------------------------------------ every table


def test_flask_makes_every_table_at_init_app(folder):
    flask = pytest.importorskip("flask")
    from libsw.web.flask import Limiter as FlaskLimiter

    seg = os.path.join(folder, "seg")
    app = flask.Flask("startup_app")
    limiter = FlaskLimiter(app, segment=seg, default="5/minute;100/hour", application="1000/hour")

    @app.route("/a")
    def a():
        return "a"

    @app.route("/b")
    @limiter.limit("2/minute")
    def b():
        return "b"

    # before any request: default's two rates (one table for every view), application, b's own
    assert len(keys_tables(folder, "seg")) == 4, keys_tables(folder, "seg")
    c = app.test_client()
    assert [c.get("/a").status_code for _ in range(6)] == [200] * 5 + [429]
    assert [c.get("/b").status_code for _ in range(3)] == [200, 200, 429]
    assert len(keys_tables(folder, "seg")) == 4  # the requests made none


def test_django_makes_every_view_table_when_the_middleware_is_made(folder):
    pytest.importorskip("django")
    seg = os.path.join(folder, "seg")
    p = run("""
        import os
        from django.conf import settings
        settings.configure(ROOT_URLCONF=__name__, SECRET_KEY="x", ALLOWED_HOSTS=["*"],
                           MIDDLEWARE=["libsw.web.django.RateLimitMiddleware"],
                           LIBSW_RATELIMIT={"segment": %r, "default": "5/minute"})
        from django.http import HttpResponse
        from django.urls import path
        from django.views import View
        from django.utils.decorators import method_decorator
        from libsw.web.django import ratelimit

        @ratelimit("2/minute")
        def v(request):
            return HttpResponse("v")

        @method_decorator(ratelimit("3/minute"), name="get")
        class C(View):
            def get(self, request):
                return HttpResponse("c")

        urlpatterns = [path("v", v), path("c", C.as_view()), path("d", lambda r: HttpResponse("d"))]
        from django.core.wsgi import get_wsgi_application
        get_wsgi_application()   # (what a gunicorn worker does at boot)
        print(len([f for f in os.listdir(%r) if f.startswith("seg.keys.")]))
    """ % (seg, folder))
    assert p.returncode == 0, p.stderr[-3000:]
    assert p.stdout.split() == ["3"], p.stdout   # default (one table for every view), v, C.get


BAD_SETTINGS = {
    "segment in no folder": ({"segment": "/nonexistent-lswt/dir/seg"}, "nonexistent-lswt"),
    "segment name over 40 bytes": ({"segment": "s" * 50}, "too long"),
    "on_full": ({"on_full": "drop"}, "'drop'"),
    "capacity 0": ({"capacity": 0}, "capacity=0"),
}


@pytest.mark.parametrize("case", sorted(BAD_SETTINGS))
@pytest.mark.parametrize("adapter", ["flask", "django", "wsgi", "asgi", "fastapi"])
def test_a_bad_setting_stops_the_start_with_only_default_rates(adapter, case):
    settings, needle = BAD_SETTINGS[case]
    pytest.importorskip({"wsgi": "libsw", "asgi": "libsw"}.get(adapter, adapter))
    opts = dict({"segment": None, "default": "5/minute"}, **settings)
    code = {
        "flask": "import flask\nfrom libsw.web.flask import Limiter\napp = flask.Flask('x')\n"
                 "app.config['LIBSW_RATELIMIT'] = %r\nLimiter(app)\n" % opts,
        "django": "from django.conf import settings\nsettings.configure(ROOT_URLCONF='__main__', SECRET_KEY='x', "
                  "MIDDLEWARE=['libsw.web.django.RateLimitMiddleware'], LIBSW_RATELIMIT=%r)\nurlpatterns = []\n"
                  "from django.core.wsgi import get_wsgi_application\nget_wsgi_application()\n" % opts,
        "wsgi": "from libsw.web import WSGIRateLimitMiddleware\nWSGIRateLimitMiddleware(lambda e, s: [], **%r)\n"
                % opts,
        "asgi": "from libsw.web import RateLimitMiddleware\nRateLimitMiddleware(lambda s, r, x: None, **%r)\n"
                % opts,
        "fastapi": "from libsw.web import Limiter\nfrom libsw.web.fastapi import RateLimit\n"
                   "o = %r\nd = o.pop('default')\nRateLimit(d, limiter=Limiter(**o))\n" % opts,
    }[adapter]
    p = run(code)
    assert p.returncode != 0 and needle in p.stderr, (adapter, case, p.stderr[-2000:])


# ------------------------------------------------------------------ reset


RESET_CHILD = """
import sys, time
import libsw.web as w
lim = w.Limiter(segment=sys.argv[1], key="global", reset=True)
rules = lim.rules("r", "5/minute")
print(sum(lim.enter(w.Request("GET", "/", None, {}), rules).allowed for _ in range(3)), flush=True)
"""


def test_reset_is_once_per_deployment_not_once_per_worker(tmp_path):
    seg = "lswt-reset-%d-%s" % (os.getpid(), uuid.uuid4().hex[:6])
    child = tmp_path / "child.py"
    child.write_text(RESET_CHILD)
    # a deployment: a master (its own process group, as gunicorn's) and 4 workers started one after another
    master = ("import subprocess, sys\n"
              "for _ in range(4):\n"
              "    print(subprocess.run([sys.executable, %r, %r], capture_output=True, text=True).stdout.strip())\n"
              % (str(child), seg))
    try:
        deploys = []
        for _ in range(2):
            p = subprocess.run([sys.executable, "-c", master], capture_output=True, text=True, timeout=300,
                               start_new_session=True)
            assert p.returncode == 0, p.stderr
            deploys.append(p.stdout.split())
        # each deployment started from zero once: 5 passes in all among its 4 workers, never 4 x 3
        assert deploys == [["3", "2", "0", "0"]] * 2, deploys
    finally:
        libsw.unlink_segment(seg)
        assert not os.path.exists("/dev/shm/%s.reset" % seg)   # the mark goes with the segment


def test_reset_with_a_deployment_id(folder):
    seg = os.path.join(folder, "seg")
    for reset, want in (("v1", 5), ("v1", 0), ("v2", 5)):
        lim = Limiter(segment=seg, key="global", reset=reset)
        rules = lim.rules("r", "5/minute")
        got = sum(lim.enter(libsw.web.Request("GET", "/", None, {}), rules).allowed for _ in range(6))
        lim.close()
        assert got == want, (reset, got)


def test_bad_reset():
    with pytest.raises(ValueError, match="reset="):
        Limiter(segment=None, reset=1)


# --------------------------------------------------------- default segment


def test_the_default_segment_is_the_applications_own():
    uid = os.getuid()
    a = default_segment("app", "/srv/one/app.py")
    b = default_segment("app", "/srv/two/app.py")
    assert a != b and a.startswith("libsw-web-%d-app-" % uid) and b.startswith("libsw-web-%d-app-" % uid)
    assert default_segment("app", "/srv/one/app.py") == a      # every worker of one application
    assert len(default_segment("x" * 100, "/p").encode()) <= 40
    assert WSGIRateLimitMiddleware(hello, segment="default").limiter.segment == \
        default_segment("app", os.path.abspath(__file__))  # a function's module
    assert Limiter(segment="default", app_path="/srv/one/app.py").segment == a


def test_two_flask_apps_of_the_same_name_do_not_share(folder):
    flask = pytest.importorskip("flask")
    from libsw.web.flask import Limiter as FlaskLimiter

    segs = []
    for sub in ("one", "two"):
        app = flask.Flask("app", root_path=os.path.join(folder, sub))
        segs.append(FlaskLimiter(app, default="5/minute").core.segment)
    try:
        assert segs[0] != segs[1], segs
    finally:
        for s in segs:
            libsw.unlink_segment(s)


# ---------------------------------------------------------------- /dev/shm


@pytest.fixture
def small_tmpfs():
    """A 2 MB tmpfs (a /dev/shm too small for the tables), as root."""
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("mounting a tmpfs needs root")
    d = tempfile.mkdtemp(prefix="lswt-shm-")
    p = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", d], capture_output=True, text=True)
    if p.returncode != 0:
        os.rmdir(d)
        pytest.skip("cannot mount a tmpfs: %s" % p.stderr.strip())
    try:
        yield d
    finally:
        subprocess.run(["umount", d], check=False)
        os.rmdir(d)


def test_a_full_dev_shm_stops_the_start_with_the_size_and_the_setting(small_tmpfs):
    seg = os.path.join(small_tmpfs, "seg")
    try:
        lim = Limiter(segment=seg, default="5/minute", capacity=200_000)   # about 30 MB for a 2 MB tmpfs
    except MemoryError as e:
        msg = str(e)
        assert "capacity=200000" in msg and "bytes" in msg and "--shm-size" in msg, msg
        return
    lim.close()
    pytest.skip("segments do not reserve their memory when made yet (issue 24 item 4): a full /dev/shm "
                "would only show later")


def test_the_default_capacity_of_six_rules_fits_a_docker_dev_shm():
    """6 rules of the defaults take well under 64 MB (Docker's default /dev/shm)."""
    lim = Limiter(segment=None)
    rules = [r for i in range(6) for r in lim.rules("rule%d" % i, "100/minute")]
    total = sum(r.lim.keyed_stats().bytes for r in rules)
    assert total < 32 << 20, total
