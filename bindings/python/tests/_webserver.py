# SPDX-License-Identifier: Apache-2.0
"""Real servers for test_web_servers: gunicorn and uvicorn on 127.0.0.1, a
random free port, bounded in time, stopped by their own process group."""
import concurrent.futures
import os
import signal
import socket
import subprocess
import sys
import time
import uuid

import requests

HERE = os.path.dirname(os.path.abspath(__file__))
APPS = os.path.join(HERE, "webapps")
START_TIMEOUT = 120  # seconds for the workers to answer, on a loaded machine
REQUEST_TIMEOUT = 30


def free_port():
    with socket.create_server(("127.0.0.1", 0)) as s:
        return s.getsockname()[1]


def segment_name(tag):
    return "lswt-%s-%d-%s" % (tag, os.getpid(), uuid.uuid4().hex[:6])


def command(server, module, port, workers, chdir=APPS):
    py = sys.executable
    if server == "gunicorn":
        return [py, "-m", "gunicorn", "--workers", str(workers), "--bind", "127.0.0.1:%d" % port,
                "--chdir", chdir, "--graceful-timeout", "5", "--timeout", "60", module]
    return [py, "-m", "uvicorn", "--workers", str(workers), "--host", "127.0.0.1", "--port", str(port),
            "--app-dir", chdir, "--no-access-log", "--no-proxy-headers", module]
    # --no-proxy-headers: uvicorn itself trusts X-Forwarded-For from 127.0.0.1
    # by default (scope["client"] rewritten); libsw's trusted_proxies decides here.


class Server:
    """One server process (and its workers, in its process group)."""

    def __init__(self, server, module, tmp_path, workers=2, env=None, chdir=APPS):
        self.workers = workers
        self.segment = segment_name(server[0] + module.split(":")[0][:2])
        self.log_path = str(tmp_path / ("%s.log" % server))
        for attempt in range(3):  # a port taken between free_port() and bind: try another
            self.port = free_port()
            self.url = "http://127.0.0.1:%d" % self.port
            e = dict(os.environ, LIBSW_WEB_SEGMENT=self.segment, PYTHONUNBUFFERED="1", **(env or {}))
            self.log = open(self.log_path, "ab")
            self.proc = subprocess.Popen(command(server, module, self.port, workers, chdir), env=e, stdout=self.log,
                                         stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                         start_new_session=True)
            if self._wait_ready():
                return
            self.stop()
        raise RuntimeError("%s did not start:\n%s" % (server, self.output()))

    def output(self):
        with open(self.log_path, errors="replace") as f:
            return f.read()[-6000:]

    def _wait_ready(self):
        """Until every worker answered /health (probed concurrently), or the
        server exited (False), bounded by START_TIMEOUT."""
        seen = set()
        deadline = time.monotonic() + START_TIMEOUT
        with concurrent.futures.ThreadPoolExecutor(4) as pool:
            while time.monotonic() < deadline:
                if self.proc.poll() is not None:
                    return False
                for r in pool.map(lambda _: self._probe(), range(8)):
                    if r is not None:
                        seen.add(r)
                if len(seen) >= self.workers:
                    return True
                time.sleep(0.2)
        raise RuntimeError("after %d s, %d of %d workers answered:\n%s"
                           % (START_TIMEOUT, len(seen), self.workers, self.output()))

    def _probe(self):
        try:
            r = requests.get(self.url + "/health", timeout=5, headers={"Connection": "close"})
            return r.headers.get("X-Worker") if r.status_code == 200 else None
        except requests.RequestException:
            return None

    def get(self, path, headers=None):
        h = {"Connection": "close"}
        h.update(headers or {})
        return requests.get(self.url + path, headers=h, timeout=REQUEST_TIMEOUT)

    def burst(self, path, keys, n, header="X-Api-Key", threads=4):
        """n requests per key, sent by threads at once: {key: [response]}."""
        jobs = [k for k in keys for _ in range(n)]
        with concurrent.futures.ThreadPoolExecutor(threads) as pool:
            got = list(pool.map(lambda k: (k, self.get(path, {header: k} if header else None)), jobs))
        out = {k: [] for k in keys}
        for k, r in got:
            out[k].append(r)
        return out

    def stop(self):
        """SIGTERM to the server's process group (its PID), SIGKILL after 20 s."""
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGTERM)
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(10)
            except ProcessLookupError:
                pass
        self.log.close()
