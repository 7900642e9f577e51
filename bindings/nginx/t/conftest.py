# SPDX-License-Identifier: Apache-2.0
"""A real nginx (Debian's, 2 workers, 127.0.0.1 on a free port) with
ngx_http_libsw_module loaded, for the tests of bindings/nginx/t.

Environment (bindings/nginx/run-tests.sh sets it):
  SW_NGX_MODULE  the module (.so)
  SW_LIB         libsw.so the module was linked with (its directory goes
                 on LD_LIBRARY_PATH)
  SWCTL          swctl of the same build
Every nginx is started with a bounded wait, stopped by its own PID (master
pid file), and its segments (named after this process's PID) removed."""
import http.client
import os
import signal
import socket
import subprocess
import tempfile
import time

import pytest

TOP = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
MODULE = os.environ.get("SW_NGX_MODULE", os.path.join(
    TOP, "_build/plain/bindings/nginx/build/ngx_http_libsw_module.so"))
LIB = os.environ.get("SW_LIB", os.path.join(TOP, "_build/plain/libsw/.libs/libsw.so"))
SWCTL = os.environ.get("SWCTL", os.path.join(TOP, "_build/plain/tools/swctl"))
ENV = dict(os.environ, LD_LIBRARY_PATH=os.path.dirname(LIB))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Nginx:
    """nginx -p DIR with the http block given; http() sends requests."""

    def __init__(self, tag, workers=2, master=True):
        self.dir = tempfile.mkdtemp(prefix="swngx-")
        os.chmod(self.dir, 0o755)  # the workers run as nobody
        self.tag = "swngx%d_%s" % (os.getpid(), tag)  # segment names: unique per process
        self.port = free_port()
        self.workers, self.master = workers, master
        self.proc = None
        os.makedirs(os.path.join(self.dir, "html"))
        for name in ("index.html", "a", "b", "api"):
            with open(os.path.join(self.dir, "html", name), "w") as f:
                f.write("ok\n")

    def seg(self, name):
        return "%s_%s" % (self.tag, name)

    def conf(self, http):
        """Write nginx.conf around http (PORT, DIR, SEG_x filled in)."""
        http = http.replace("PORT", str(self.port)).replace("DIR", self.dir)
        http = http.replace("SEG_", self.tag + "_")
        text = """load_module %s;
worker_processes %d;
master_process %s;
daemon %s;
pid %s/nginx.pid;
error_log %s/error.log info;
events { worker_connections 512; }
http {
  access_log off;
  client_body_temp_path %s/tmp; proxy_temp_path %s/tmp; fastcgi_temp_path %s/tmp;
  uwsgi_temp_path %s/tmp; scgi_temp_path %s/tmp;
  log_format libsw '$http_x_client $status $libsw_status';
%s
}
""" % (MODULE, self.workers, "on" if self.master else "off", "on" if self.master else "off",
       self.dir, self.dir, self.dir, self.dir, self.dir, self.dir, self.dir, http)
        with open(os.path.join(self.dir, "nginx.conf"), "w") as f:
            f.write(text)

    def cmd(self, *args, wrapper=()):
        return list(wrapper) + ["nginx", "-p", self.dir + "/", "-c", self.dir + "/nginx.conf"] + \
            list(args)

    def test(self):
        """nginx -t: (returncode, output)."""
        p = subprocess.run(self.cmd("-t"), env=ENV, capture_output=True, text=True, timeout=60)
        return p.returncode, p.stdout + p.stderr

    def start(self, wrapper=(), timeout=30):
        os.makedirs(os.path.join(self.dir, "tmp"), exist_ok=True)
        if self.master:
            p = subprocess.run(self.cmd(), env=ENV, capture_output=True, text=True, timeout=60)
            assert p.returncode == 0, p.stdout + p.stderr + self.error_log()
        else:  # in the foreground (valgrind): stopped by its PID
            self.proc = subprocess.Popen(self.cmd(wrapper=wrapper), env=ENV)
        deadline = time.time() + timeout
        while True:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                    break
            except OSError:
                if time.time() > deadline:
                    raise AssertionError("nginx did not listen within %d s:\n%s"
                                         % (timeout, self.error_log()))
                time.sleep(0.05)
        if self.master:
            self.wait_workers(self.workers)

    def pid(self):
        with open(os.path.join(self.dir, "nginx.pid")) as f:
            return int(f.read())

    def workers_now(self):
        out = subprocess.run(["pgrep", "-P", str(self.pid())], capture_output=True, text=True)
        return [int(x) for x in out.stdout.split()]

    def wait_workers(self, n, old=(), timeout=20):
        deadline = time.time() + timeout
        while time.time() < deadline:
            now = [w for w in self.workers_now() if w not in old]
            if len(now) >= n:
                return now
            time.sleep(0.05)
        raise AssertionError("nginx has not %d new workers: %s" % (n, self.error_log()))

    def reload(self):
        """nginx -s reload, then wait until only new workers serve."""
        old = self.workers_now()
        p = subprocess.run(self.cmd("-s", "reload"), env=ENV, capture_output=True, text=True,
                           timeout=60)
        assert p.returncode == 0, p.stdout + p.stderr
        deadline = time.time() + 20
        while time.time() < deadline:
            now = self.workers_now()
            if now and not set(now) & set(old) and len(now) >= self.workers:
                return
            time.sleep(0.05)
        raise AssertionError("reload: old workers still there: " + self.error_log())

    def stop(self):
        if self.proc is not None:
            if self.proc.poll() is None:
                self.proc.send_signal(signal.SIGQUIT)
                try:
                    self.proc.wait(timeout=60)
                except subprocess.TimeoutExpired:
                    self.proc.kill()
                    self.proc.wait()
            return
        try:
            pid = self.pid()
        except (OSError, ValueError):
            return
        try:
            os.kill(pid, signal.SIGQUIT)
        except ProcessLookupError:
            return
        deadline = time.time() + 15
        while time.time() < deadline:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                return
            time.sleep(0.05)
        os.kill(pid, signal.SIGKILL)

    def error_log(self):
        try:
            with open(os.path.join(self.dir, "error.log"), errors="replace") as f:
                return f.read()
        except OSError:
            return ""

    def access_log(self, name="access.log"):
        with open(os.path.join(self.dir, name), errors="replace") as f:
            return f.read()

    def get(self, path, headers=None, conn=None):
        """(status, headers dict, body) of one GET."""
        c = conn or http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
        c.request("GET", path, headers=headers or {})
        r = c.getresponse()
        body = r.read()
        if conn is None:
            c.close()
        return r.status, dict(r.getheaders()), body

    def remove_segments(self):
        for f in os.listdir("/dev/shm"):
            if f.startswith(self.tag + "_"):
                os.unlink(os.path.join("/dev/shm", f))


@pytest.fixture
def nginx(request):
    made = []

    def make(tag=None, **kw):
        n = Nginx(tag or request.node.name.replace("test_", "")[:20], **kw)
        made.append(n)
        return n
    yield make
    for n in made:
        n.stop()
        n.remove_segments()


def swctl(*args):
    p = subprocess.run([SWCTL] + list(args), env=ENV, capture_output=True, text=True, timeout=60)
    return p.returncode, p.stdout + p.stderr
