#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Runs the marked code blocks of README.md and docs/*.md as written.

A block is marked by an HTML comment on the line before its fence (other
HTML comments may sit between the two):

    <!-- doctest: KIND [OPTION ...] -->

docs/reliability.md ("Examples that run") describes the kinds and options.
This file only finds fences and marker lines; it parses no other Markdown.

    doctest.py --check [PAGE ...] every copyable block is marked (no root)
    doctest.py --list             the blocks and what is done with each
    doctest.py --packages         the Debian packages the blocks' apt-get lines name
    doctest.py --run [PAGE ...]   run them: only inside the sandbox that
                                  tests/docs/run.sh makes (private mounts,
                                  network and PIDs); README.md always runs first
"""
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time

TOP = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))

FENCE = re.compile(r"^(`{3,})([^`\s]*)\s*$")
COMMENT = re.compile(r"^<!--.*-->$")
MARK = re.compile(r"^<!--\s*doctest:\s*(.*?)\s*-->$")

# kind -> fence languages it may carry, options it takes
KINDS = {
    "c": ({"c"}, {"expect", "timeout", "file"}),
    "python": ({"python", "py"}, {"expect", "timeout"}),
    "lua": ({"lua"}, {"expect", "timeout"}),
    "sh": ({"sh", "shell", "bash"}, {"expect", "timeout", "background", "ready", "stop-after"}),
    "nginx": ({"nginx"}, {"timeout"}),
    "prometheus": ({"yaml", "yml"}, {"timeout"}),
    "output": ({"", "text", "json"}, set()),
    "skip": (None, set()),
}
# api.md is the reference: its C blocks of declarations need no marker; a
# block with a statement (a call, a control keyword, an assignment) does.
STATEMENT = re.compile(r"^\s*(?:(?:if|for|while|switch|return)\b|[a-z_][\w.>-]*\s*\(|[a-z_]\w*\s*=[^=])")


class DocError(Exception):
    pass


class Block:
    def __init__(self, page, line, lang, code, marker_line, marker):
        self.page, self.line, self.lang, self.code = page, line, lang, code
        self.marker_line, self.marker = marker_line, marker
        self.kind, self.opts, self.reason = None, {}, ""
        if marker is not None:
            self._parse_marker()

    def where(self):
        return "%s:%d" % (self.page, self.line)

    def _parse_marker(self):
        text = self.marker
        kind = text.split(None, 1)[0] if text else ""
        if kind not in KINDS:
            raise DocError("%s: unknown doctest kind %r (one of %s)"
                           % (self.where(), kind, ", ".join(sorted(KINDS))))
        self.kind = kind
        langs, known = KINDS[kind]
        if kind == "skip":
            self.reason = text[4:].strip()
            if not self.reason:
                raise DocError("%s: 'doctest: skip' needs a reason" % self.where())
            return
        if self.lang not in langs:
            raise DocError("%s: a %s block cannot be fenced as %r" % (self.where(), kind, self.lang))
        for word in shlex.split(text)[1:]:
            key, eq, val = word.partition("=")
            if key not in known:
                raise DocError("%s: option %r is not one of %s for %s blocks"
                               % (self.where(), key, sorted(known) or "none", kind))
            if key == "expect":
                self.opts.setdefault("expect", []).append(val)
            else:
                self.opts[key] = val if eq else True

    def timeout(self, default=60):
        return float(self.opts.get("timeout", default))


def parse(page):
    """The fenced blocks of a page (path relative to TOP), with their markers."""
    with open(os.path.join(TOP, page), encoding="utf-8") as f:
        lines = f.read().split("\n")
    blocks, used_marks, i = [], set(), 0
    marks = {n for n, l in enumerate(lines) if MARK.match(l.rstrip())}
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        ticks, lang = m.groups()
        j = i + 1
        while j < len(lines) and lines[j].rstrip() != ticks:
            j += 1
        if j == len(lines):
            raise DocError("%s:%d: fence never closed" % (page, i + 1))
        marker_line = marker = None
        k = i - 1
        while k >= 0 and COMMENT.match(lines[k].rstrip()):
            mm = MARK.match(lines[k].rstrip())
            if mm:
                marker_line, marker = k, mm.group(1)
                used_marks.add(k)
                break
            k -= 1
        blocks.append(Block(page, i + 2, lang, "\n".join(lines[i + 1:j]) + "\n", marker_line, marker))
        i = j + 1
    for n in sorted(marks - used_marks):
        raise DocError("%s:%d: a doctest marker that no fence follows" % (page, n + 1))
    return blocks


def pages():
    """README.md, then the pages in the order README.md's documentation table
    lists them (a reader's order: later pages may use what earlier ones made),
    then any other page of docs/."""
    with open(os.path.join(TOP, "README.md"), encoding="utf-8") as f:
        readme = f.read()
    order = ["README.md"]
    for p in re.findall(r"\]\((docs/[\w.-]+\.md)\)", readme):
        if p not in order:
            order.append(p)
    for p in sorted(os.listdir(os.path.join(TOP, "docs"))):
        if p.endswith(".md") and "docs/" + p not in order:
            order.append("docs/" + p)
    return [p for p in order if os.path.exists(os.path.join(TOP, p))]


def is_listing(block):
    code = re.sub(r"/\*.*?\*/", "", block.code, flags=re.S)
    return block.page == "docs/api.md" and block.lang == "c" and not any(
        STATEMENT.match(l) for l in code.split("\n"))


def check(all_blocks):
    """Every block with a language is marked, except api.md's declarations."""
    bad = [b for b in all_blocks if b.marker is None and b.lang and not is_listing(b)]
    for b in bad:
        print("%s: a %s block without a doctest marker (docs/reliability.md says how to mark it)"
              % (b.where(), b.lang), file=sys.stderr)
    return not bad


def apt_packages(all_blocks):
    pkgs = []
    for b in all_blocks:
        if b.kind != "sh":
            continue
        for line in b.code.replace("\\\n", " ").split("\n"):
            words = shlex.split(line, comments=True)
            while "apt-get" in words:
                words = words[words.index("apt-get") + 1:]
                args = [w for w in words if not w.startswith("-")]
                if args[:1] == ["install"]:
                    for w in args[1:]:
                        if w in ("&&", "||", ";", "|"):
                            break
                        if w not in pkgs:
                            pkgs.append(w)
    return pkgs


# ------------------------------------------------------------------ running

def normalise(text):
    """Output as compared with an output block: every number is N, every
    run of blanks one space, no blanks at line ends, no trailing empty lines."""
    out = []
    for line in text.rstrip("\n").split("\n"):
        line = re.sub(r"(?<![\w.])-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?(?![\w])", "N", line)
        out.append(re.sub(r"\s+", " ", line).strip())
    return out


def output_matches(expected, got):
    """Line by line after normalise(); an expected line '...' stands for any
    number of lines."""
    exp, act = normalise(expected), normalise(got)

    def match(i, j):
        if i == len(exp):
            return j == len(act)
        if exp[i] == "...":
            return any(match(i + 1, k) for k in range(j, len(act) + 1))
        return j < len(act) and act[j] == exp[i] and match(i + 1, j + 1)

    return match(0, 0)


class Sandbox:
    """What run.sh prepared: a private mount, network and PID namespace in
    which this process is PID 1. Here /dev/shm is an empty tmpfs and
    /usr/local, /etc, /var/log and /run are overlays whose writes land in the
    work directory, so `make install`, `ldconfig`, segments and an nginx on
    port 80 change nothing outside, and nothing outside disturbs them."""

    OVERLAYS = ("/usr/local", "/etc", "/var/log", "/run")

    def __init__(self):
        if os.environ.get("SW_DOCTEST_SANDBOX") != "1" or os.getpid() != 1:
            raise SystemExit("doctest.py --run: only inside tests/docs/run.sh's namespaces "
                             "(it mounts over /etc and /usr/local)")
        self.work = os.environ["SW_DOCTEST_WORK"]
        for d in self.OVERLAYS:
            base = os.path.join(self.work, "overlay", d.strip("/").replace("/", "-"))
            os.makedirs(base + "/upper")
            os.makedirs(base + "/work")
            sh(["mount", "-t", "overlay", "overlay", "-o",
                "lowerdir=%s,upperdir=%s/upper,workdir=%s/work" % (d, base, base), d])
        sh(["mount", "-t", "tmpfs", "-o", "mode=1777", "tmpfs", "/dev/shm"])
        sh(["ip", "link", "set", "lo", "up"])
        self.src = os.path.join(self.work, "libsw")      # the reader's clone
        self.blocks = os.path.join(self.work, "blocks")
        self.home = os.path.join(self.work, "home")
        self.shim = os.path.join(self.work, "shim")
        for d in (self.blocks, self.home, self.shim):
            os.makedirs(d)
        self._copy_tree()
        shutil.copy(os.path.join(TOP, "tests", "docs", "apt-get"), os.path.join(self.shim, "apt-get"))
        os.chmod(os.path.join(self.shim, "apt-get"), 0o755)
        self.env = {
            "PATH": self.shim + ":/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
            "HOME": self.home, "LANG": "C.UTF-8", "TERM": "dumb", "USER": "root",
            "MAKEFLAGS": "-j2", "PIP_NO_CACHE_DIR": "1", "PIP_DISABLE_PIP_VERSION_CHECK": "1",
        }

    def _copy_tree(self):
        """The files git knows (tracked, or new and not ignored) as the tree has
        them now: what a reader's clone of this commit holds."""
        names = subprocess.run(["git", "-C", TOP, "ls-files", "-z", "--cached", "--others",
                                "--exclude-standard"], check=True, capture_output=True).stdout
        for name in names.decode().split("\0"):
            src = os.path.join(TOP, name)
            if name and os.path.isfile(src):
                dst = os.path.join(self.src, name)
                os.makedirs(os.path.dirname(dst), exist_ok=True)
                shutil.copy2(src, dst)


def sh(argv):
    subprocess.run(argv, check=True)


def stop_group(proc, sig=signal.SIGTERM, wait=10):
    """Stop a block's process group (its leader's PID is the group id)."""
    try:
        os.killpg(proc.pid, sig)
    except ProcessLookupError:
        pass
    try:
        return proc.wait(wait)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        return proc.wait()


class Runner:
    def __init__(self, sb):
        self.sb = sb
        self.counts, self.skipped, self.failures = {}, [], []
        self.last_output = None
        self.background = []
        self.nginx = None

    # one block -----------------------------------------------------------
    def script(self, b, ext, prefix=""):
        """The block in a file whose line numbers are the page's (blank lines
        before it), so that errors point into the page."""
        name = "%s-%d.%s" % (re.sub(r"\W", "_", b.page), b.line, ext)
        path = os.path.join(self.sb.blocks, name)
        with open(path, "w") as f:
            f.write(prefix if prefix else "\n" * (b.line - 1))
            f.write(b.code)
        return path

    def spawn(self, argv, b, out):
        return subprocess.Popen(argv, cwd=self.sb.src, env=self.sb.env, stdin=subprocess.DEVNULL,
                                stdout=out, stderr=subprocess.STDOUT, start_new_session=True)

    def execute(self, argv, b, timeout=None):
        """Run to the end within the block's timeout; (status, output)."""
        log = os.path.join(self.sb.blocks, "%s-%d.out" % (re.sub(r"\W", "_", b.page), b.line))
        with open(log, "ab") as out:
            p = self.spawn(argv, b, out)
            try:
                rc = p.wait(timeout or b.timeout())
            except subprocess.TimeoutExpired:
                stop_group(p, signal.SIGKILL)
                raise DocError("still running after %g s (timeout=)" % (timeout or b.timeout()))
        with open(log, errors="replace") as f:
            text = f.read()
        return rc, text

    def must(self, argv, b, what, timeout=None):
        rc, text = self.execute(argv, b, timeout)
        if rc != 0:
            raise DocError("%s exited with %d:\n%s" % (what, rc, text))
        return text

    def run_block(self, b):
        kind = b.kind
        if kind == "sh":
            path = self.script(b, "sh")
            if "background" in b.opts or "stop-after" in b.opts:
                return self.run_server(b, ["sh", "-e", path])
            return self.must(["sh", "-e", path], b, "the shell block")
        if kind == "c":
            if "file" in b.opts:       # a file the next blocks compile, as the page says
                with open(os.path.join(self.sb.src, b.opts["file"]), "w") as f:
                    f.write(b.code)
                return None
            src = self.script(b, "c", '#line %d "%s"\n' % (b.line, b.page))
            exe = src[:-2]
            self.must(["sh", "-c", 'cc -Wall -Wextra -Werror -o "$0" "$1" $(pkg-config --cflags --libs libsw)',
                       exe, src], b, "cc (pkg-config libsw, from the installed library)")
            return self.must([exe], b, "the program")
        if kind == "python":
            python = os.path.join(self.sb.src, ".venv", "bin", "python")
            if not os.path.exists(python):
                raise DocError("no .venv in the clone: README.md's Python steps did not run")
            return self.must([python, self.script(b, "py")], b, "python")
        if kind == "lua":
            return self.must(["luajit", self.script(b, "lua")], b, "luajit")
        if kind == "prometheus":
            conf = self.script(b, "yml", "\n")
            return self.must(["promtool", "check", "config", conf], b, "promtool check config")
        if kind == "nginx":
            return self.start_nginx(b)
        if kind == "output":
            if self.last_output is None:
                raise DocError("an output block with no block before it")
            if not output_matches(b.code, self.last_output):
                raise DocError("the previous block printed:\n%s\nwhich does not match the page's "
                               "(numbers and blanks aside):\n%s" % (self.last_output, b.code))
            return self.last_output
        raise DocError("kind %s" % kind)

    def run_server(self, b, argv):
        """A command that runs until stopped: `stop-after=S` stops it after S
        seconds, `background` at the end of the page (`ready=PORT`: the next
        block starts once 127.0.0.1:PORT accepts). It must still be running
        when stopped, and then exit within 10 s."""
        log = os.path.join(self.sb.blocks, "%s-%d.out" % (re.sub(r"\W", "_", b.page), b.line))
        out = open(log, "wb")
        p = self.spawn(argv, b, out)
        if "ready" in b.opts:
            deadline = time.time() + 10
            while True:
                if p.poll() is not None:
                    raise DocError("exited with %s before 127.0.0.1:%s answered:\n%s"
                                   % (p.returncode, b.opts["ready"], open(log).read()))
                try:
                    socket.create_connection(("127.0.0.1", int(b.opts["ready"])), 1).close()
                    break
                except OSError:
                    if time.time() > deadline:
                        stop_group(p)
                        raise DocError("nothing answers at 127.0.0.1:%s after 10 s" % b.opts["ready"])
                    time.sleep(0.1)
        if "stop-after" in b.opts:
            time.sleep(float(b.opts["stop-after"]))
            return self.stop_server(b, p, log)
        self.background.append((b, p, log))
        return ""

    def stop_server(self, b, p, log):
        if p.poll() is not None:
            raise DocError("exited with %s before it was stopped:\n%s" % (p.returncode, open(log).read()))
        rc = stop_group(p)
        text = open(log, errors="replace").read()
        if rc not in (0, -signal.SIGTERM, 128 + signal.SIGTERM):
            raise DocError("exited with %s when stopped:\n%s" % (rc, text))
        return text

    def start_nginx(self, b):
        """The block is nginx.conf, used as the reader would: written to
        /etc/nginx/nginx.conf, checked with nginx -t and started (with a
        prefix of its own, -p, so that no path may depend on the default
        prefix, and its error log at level warn). It runs until the end of the page, when it is stopped by the
        PID in its pid file; its error log must then hold no error (nor a
        warning of libsw's) and its access log at least one request."""
        self.stop_nginx()
        with open("/etc/nginx/nginx.conf", "w") as f:
            f.write(b.code)
        for log in ("/var/log/nginx/error.log", "/var/log/nginx/access.log"):
            open(log, "w").close()
        prefix = os.path.join(self.sb.work, "nginx-prefix") + "/"
        os.makedirs(prefix, exist_ok=True)
        logs = ["-g", "error_log /var/log/nginx/error.log warn;"]   # Debian's default level is error
        self.must(["nginx", "-t", "-p", prefix] + logs, b, "nginx -t", 30)
        self.must(["nginx", "-p", prefix] + logs, b, "nginx (start)", 30)
        deadline = time.time() + 10
        while not os.path.exists("/run/nginx.pid"):
            if time.time() > deadline:
                raise DocError("nginx wrote no /run/nginx.pid:\n" + open("/var/log/nginx/error.log").read())
            time.sleep(0.05)
        self.nginx = b
        return ""

    def stop_nginx(self):
        if self.nginx is None:
            return
        b, self.nginx = self.nginx, None
        try:
            pid = int(open("/run/nginx.pid").read())
        except (OSError, ValueError):
            raise DocError("nginx is gone (no /run/nginx.pid): " + open("/var/log/nginx/error.log").read())
        os.kill(pid, signal.SIGQUIT)                 # graceful stop, by its own PID
        deadline = time.time() + 15
        while True:
            try:                                     # the master's parent is this PID 1
                if os.waitpid(pid, os.WNOHANG)[0] == pid:
                    break
            except ChildProcessError:
                try:
                    os.kill(pid, 0)
                except ProcessLookupError:
                    break
            if time.time() > deadline:
                os.kill(pid, signal.SIGKILL)
                raise DocError("nginx did not stop within 15 s")
            time.sleep(0.05)
        errors = [l for l in open("/var/log/nginx/error.log", errors="replace")
                  if re.search(r"\[(emerg|alert|crit|error)\]", l) or ("[warn]" in l and "libsw" in l)]
        if errors:
            raise DocError("nginx (%s) logged:\n%s" % (b.where(), "".join(errors)))
        if os.path.getsize("/var/log/nginx/access.log") == 0:
            raise DocError("nginx (%s) served no request: the page must send it one" % b.where())

    def end_page(self, page):
        for b, p, log in self.background:
            self.attempt(b, lambda: self.stop_server(b, p, log), "stopped at the end of the page")
        self.background = []
        if self.nginx is not None:
            b = self.nginx
            self.attempt(b, self.stop_nginx, "stopped at the end of the page")

    def attempt(self, b, fn, what=""):
        t0 = time.time()
        try:
            out = fn()
            if b.kind != "output" and not (what or b.opts.get("file")):
                self.last_output = out
            started = "background" in b.opts and not what    # checked when stopped
            for e in [] if started else b.opts.get("expect", []):
                if e not in (out or ""):
                    raise DocError("the output lacks %r:\n%s" % (e, out))
        except DocError as e:
            self.failures.append(b.where())
            print("FAIL %-34s %-10s %s\n     %s" % (b.where(), b.kind, what, str(e).replace("\n", "\n     ")),
                  flush=True)
            return False
        if not what:
            self.counts[b.kind] = self.counts.get(b.kind, 0) + 1
        print("ok   %-34s %-10s %5.1f s %s" % (b.where(), b.kind, time.time() - t0, what), flush=True)
        return True

    def run_page(self, page, blocks):
        """A page is one reader's session: it starts with an empty /dev/shm
        (what README.md installed stays), and what it started is stopped at
        its end."""
        self.last_output = None
        if any(b.kind not in (None, "skip") for b in blocks):
            sh(["mount", "-t", "tmpfs", "-o", "mode=1777", "tmpfs", "/dev/shm"])   # over the last one
        for b in blocks:
            if b.kind is None:
                continue
            if b.kind == "skip":
                self.skipped.append(b)
                print("skip %-34s %s" % (b.where(), b.reason), flush=True)
                continue
            self.attempt(b, lambda: self.run_block(b))
        self.end_page(page)


def main(argv):
    mode = argv[1] if len(argv) > 1 else "--check"
    try:
        order = pages()
        parsed = {p: parse(p) for p in order}
    except DocError as e:
        print(e, file=sys.stderr)
        return 1
    wanted = argv[2:]
    for p in wanted:
        if p not in order:
            print("no such page: %s" % p, file=sys.stderr)
            return 2
    chosen = [p for p in order if not wanted or p in wanted or (mode == "--run" and p == "README.md")]
    all_blocks = [b for p in order for b in parsed[p]]
    if mode == "--check":
        all_blocks = [b for p in chosen for b in parsed[p]]
        ok = check(all_blocks)
        marked = [b for b in all_blocks if b.kind]
        print("doctest: %d marked blocks in %d pages%s" % (len(marked), len(chosen), "" if ok else "; unmarked blocks"))
        return 0 if ok else 1
    if mode == "--packages":
        print(" ".join(apt_packages(all_blocks)))
        return 0
    if mode == "--list":
        for b in all_blocks:
            if b.kind:
                print("%-34s %-10s %s" % (b.where(), b.kind, b.reason or " ".join(
                    "%s=%s" % (k, v) for k, v in b.opts.items())))
        return 0
    if mode != "--run":
        print(__doc__, file=sys.stderr)
        return 2
    if not check([b for p in chosen for b in parsed[p]]):
        return 1
    sb = Sandbox()
    r = Runner(sb)
    t0 = time.time()
    for p in chosen:
        r.run_page(p, parsed[p])
    total = sum(r.counts.values())
    print("\ndoctest: ran %d blocks (%s), skipped %d, in %.0f s"
          % (total, ", ".join("%s %d" % kv for kv in sorted(r.counts.items())), len(r.skipped),
             time.time() - t0))
    if r.failures:
        print("doctest: FAILED: %s" % " ".join(r.failures))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
