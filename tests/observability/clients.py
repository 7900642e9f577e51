#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Hostile clients for `swctl serve` (tests/observability/run.sh).

    clients.py idle PORT N               N idle connections, then GET /metrics
    clients.py slow PORT LOG RESOURCE    a client that never reads /metrics; others
                                         and the metric log go on
    clients.py write-deadline PORT       a client that never reads is reset
    clients.py read-deadline PORT        a client sending one byte at a time is cut
    clients.py cap PORT CAP              over the cap: 503, then closed at accept
    clients.py malformed PORT            bad requests: 4xx (505 for HTTP/9.9) or a
                                         close, never a crash

Each check exits 1 with "FAIL: ..." when swctl misbehaves. Bounds on time are
liveness bounds (a whole answer within 15 s, other progress within 5 s, a
cut within 15 s), never latency targets; measured times are printed for the
report. (A /metrics of 6 MB took more than 5 s on a loaded 2-core machine.)
"""
import socket
import sys
import time

HOST = "127.0.0.1"
LIVENESS_S = 5.0
ANSWER_S = 15.0


def fail(msg):
    print("FAIL: " + msg, file=sys.stderr)
    sys.exit(1)


def connect(port, rcvbuf=None):
    s = socket.socket()
    if rcvbuf:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    s.settimeout(LIVENESS_S)
    s.connect((HOST, port))
    return s


def request(path):
    return b"GET " + path.encode() + b" HTTP/1.1\r\nHost: swctl\r\n\r\n"


def read_all(s, deadline):
    data = b""
    while time.monotonic() < deadline:
        s.settimeout(max(0.05, deadline - time.monotonic()))
        try:
            d = s.recv(1 << 16)
        except socket.timeout:
            break
        except ConnectionResetError:
            return data, "reset"
        if not d:
            return data, "closed"
        data += d
    return data, "timeout"


def status_of(data):
    line = data.split(b"\r\n", 1)[0]
    parts = line.split(b" ")
    if len(parts) >= 2 and parts[0].startswith(b"HTTP/") and parts[1].isdigit():
        return int(parts[1])
    return None


def get(port, path="/metrics", what="a request"):
    """A whole reply within ANSWER_S: (status, body bytes, seconds)."""
    t0 = time.monotonic()
    try:
        s = connect(port)
        s.sendall(request(path))
    except OSError as e:
        fail("%s: cannot connect or send: %s" % (what, e))
    data, how = read_all(s, t0 + ANSWER_S)
    s.close()
    dt = time.monotonic() - t0
    if how != "closed":
        fail("%s got no whole answer within %.0f s (%s after %d bytes)" % (what, ANSWER_S, how, len(data)))
    head, _, body = data.partition(b"\r\n\r\n")
    return status_of(head), body, dt


def content_length(head):
    for line in head.split(b"\r\n"):
        k, _, v = line.partition(b":")
        if k.strip().lower() == b"content-length":
            return int(v.strip())
    return None


def check_idle(port, n):
    idle = [connect(port) for _ in range(n)]
    time.sleep(0.2)
    status, body, dt = get(port, what="GET /metrics after %d idle connections" % n)
    if status != 200 or b"libsw_pass_total" not in body:
        fail("GET /metrics after %d idle connections: status %s" % (n, status))
    print("GET /metrics (%d bytes) with %d idle connections open: %.3f s" % (len(body), n, dt))
    for s in idle:
        s.close()


def steady_seconds(log, resource):
    try:
        with open(log, "rb") as f:
            lines = f.read().split(b"\n")
    except FileNotFoundError:
        return []
    out = []
    for line in lines:
        f = line.split(b"|")
        if len(f) > 2 and f[1] == resource.encode():
            out.append(int(f[0]))
    return out


def never_reads(port):
    """A client that asks for /metrics and never reads: its small receive
    buffer fills, and swctl's reply to it stays unfinished."""
    s = connect(port, rcvbuf=4096)
    s.sendall(request("/metrics"))
    return s


def still_open(s):
    """The connection is established: no FIN or RST came (read from the
    kernel's TCP state, so that nothing waiting in the buffer is read)."""
    TCP_ESTABLISHED = 1
    return s.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 1)[0] == TCP_ESTABLISHED


def check_slow(port, log, resource):
    slow = never_reads(port)
    time.sleep(1.0)
    before = max(steady_seconds(log, resource) or [0])
    status, body, dt = get(port, what="GET /metrics while a client does not read its /metrics")
    if status != 200:
        fail("GET /metrics while a client does not read: status %s" % status)
    print("GET /metrics (%d bytes) while another client does not read its own: %.3f s" % (len(body), dt))
    status, _, dt = get(port, "/api/series", what="GET /api/series while a client does not read")
    if status != 200:
        fail("GET /api/series while a client does not read: status %s" % status)
    # the metric log goes on: new seconds of the resource with traffic
    t0 = time.monotonic()
    while time.monotonic() - t0 < LIVENESS_S:
        newer = [t for t in steady_seconds(log, resource) if t > before]
        if len(newer) >= 2:
            break
        time.sleep(0.2)
    else:
        fail("the metric log stopped while a client did not read /metrics (last second %d)" % before)
    print("metric log: %d new second(s) of %s while the client did not read" % (len(newer), resource))
    if not still_open(slow):
        fail("the client that does not read was closed before its deadline (the check proves nothing)")
    slow.close()


def check_write_deadline(port):
    slow = never_reads(port)
    t0 = time.monotonic()
    # the reply is cut: the socket is reset (what was sent stays readable first)
    time.sleep(0.5)
    while time.monotonic() - t0 < 15:
        if not still_open(slow):
            break
        time.sleep(0.2)
    else:
        fail("a client that does not read its /metrics was not cut within 15 s")
    dt = time.monotonic() - t0
    data, how = read_all(slow, time.monotonic() + LIVENESS_S)
    head, _, body = data.partition(b"\r\n\r\n")
    n = content_length(head)
    if n is not None and len(body) >= n:
        fail("the slow client got its whole reply: nothing was cut")
    print("a client that does not read /metrics: reset after %.1f s (%d of %s bytes sent, %s)" % (dt, len(body), n, how))


def check_read_deadline(port):
    s = connect(port)
    t0 = time.monotonic()
    req = request("/metrics")[:-2] + b"X-Slow: " + b"a" * 200 + b"\r\n\r\n"
    try:
        for i in range(len(req)):
            s.send(req[i:i + 1])
            time.sleep(0.25)
            if time.monotonic() - t0 > 15:
                fail("a client sending one byte every 0.25 s was not cut within 15 s")
            if not still_open(s):
                break
    except OSError:
        pass
    dt = time.monotonic() - t0
    if dt > 15:
        fail("a client sending one byte every 0.25 s was not cut within 15 s")
    print("a client sending one byte every 0.25 s: cut after %.1f s" % dt)


def refused(port):
    """What a request over the cap gets: ('503', retry_after) or ('closed', how)."""
    t0 = time.monotonic()
    s = connect(port)
    try:
        s.sendall(request("/metrics"))
    except OSError:
        return "closed", "send failed"
    data, how = read_all(s, t0 + LIVENESS_S)
    s.close()
    if how == "timeout":
        fail("a connection over the cap got neither an answer nor a close within %.0f s" % LIVENESS_S)
    if not data:
        return "closed", how
    head = data.partition(b"\r\n\r\n")[0]
    st = status_of(head)
    if st != 503:
        fail("a connection over the cap got status %s, not 503" % st)
    if b"\r\nretry-after: 1" not in head.lower():
        fail("503 without Retry-After: %r" % head)
    return "503", how


def check_cap(port, cap):
    held = [connect(port) for _ in range(cap)]
    time.sleep(0.3)
    kind, _ = refused(port)
    if kind != "503":
        fail("the first connection over the cap was closed, not answered 503")
    print("over the cap of %d: 503 with Retry-After" % cap)
    # the connections answered 503 are bounded too; then: closed at accept
    for _ in range(40):
        held.append(connect(port))
    time.sleep(0.3)
    kind, how = refused(port)
    if kind != "closed":
        fail("with %d connections open, a new one was still answered" % len(held))
    print("with %d connections held open: a new one is closed at accept (%s)" % (len(held), how))
    for s in held:
        s.close()
    time.sleep(0.5)
    # the dashboard's page, small: this server's --write-timeout (2 s) is
    # shorter than a loaded machine may take to send a 6 MB /metrics
    status, _, dt = get(port, path="/", what="GET / once the connections are closed")
    if status != 200:
        fail("GET / once the connections are closed: %s" % status)


def check_malformed(port):
    cases = [
        ("a header of 1 MiB", request("/metrics")[:-2] + b"X-Big: " + b"a" * (1 << 20) + b"\r\n\r\n"),
        ("a request line without a version", b"GET /metrics\r\n\r\n"),
        ("binary junk", bytes(range(256)) * 16 + b"\r\n\r\n"),
        ("a TLS hello", bytes.fromhex("16030100a5010000a10303") + b"\0" * 160),
        ("a request line of 64 KiB", b"GET /" + b"a" * 65536 + b" HTTP/1.1\r\n\r\n"),
        ("a header without a colon", b"GET /metrics HTTP/1.1\r\nHost swctl\r\n\r\n"),
        ("NUL in the path", b"GET /met\0rics HTTP/1.1\r\nHost: swctl\r\n\r\n"),
        ("HTTP/9.9", b"GET /metrics HTTP/9.9\r\nHost: swctl\r\n\r\n"),
        ("POST with a body", b"POST /metrics HTTP/1.1\r\nHost: swctl\r\nContent-Length: 3\r\n\r\nabc"),
    ]
    for name, req in cases:
        t0 = time.monotonic()
        s = connect(port)
        try:
            s.sendall(req)
        except OSError:
            pass  # closed while we sent: a close is an answer
        data, how = read_all(s, t0 + 15)  # a TLS hello waits for --read-timeout
        s.close()
        st = status_of(data) if data else None
        if how == "timeout":
            fail("%s: neither an answer nor a close within 15 s" % name)
        # 4xx, or 505 for a version it does not speak
        if data and (st is None or not (400 <= st < 500 or st == 505)):
            fail("%s: answered %r" % (name, data[:80]))
        print("%-34s -> %s" % (name, ("HTTP %d" % st) if st else "closed (%s)" % how))
    status, _, _ = get(port, what="GET /metrics after the malformed requests")
    if status != 200:
        fail("GET /metrics after the malformed requests: %s" % status)


def main():
    cmd, port = sys.argv[1], int(sys.argv[2])
    if cmd == "idle":
        check_idle(port, int(sys.argv[3]))
    elif cmd == "slow":
        check_slow(port, sys.argv[3], sys.argv[4])
    elif cmd == "write-deadline":
        check_write_deadline(port)
    elif cmd == "read-deadline":
        check_read_deadline(port)
    elif cmd == "cap":
        check_cap(port, int(sys.argv[3]))
    elif cmd == "malformed":
        check_malformed(port)
    else:
        fail("unknown check " + cmd)


if __name__ == "__main__":
    main()
