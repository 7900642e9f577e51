#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Mutation check of the C suite: apply each one-line mutant of
tests/mutation/mutants.txt to a scratch copy of the tree, rebuild, and run
the Check programs (fastest first, stopping at the first failure). A mutant
that no test fails "survived". Prints the score (killed / non-equivalent)
and every survivor. Not part of CI: run it before resolving an issue that
touches libsw/ (docs/reliability.md).

    tests/mutation/run.py [-k PATTERN]... [--keep]

mutants.txt: one mutant per line, tab-separated:
    file <TAB> text found exactly once <TAB> replacement <TAB> what it breaks
Lines starting with '#' are comments; a mutant whose last field starts with
"equivalent:" is applied and reported but left out of the score (the field
says why no test can tell it from the real code).
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.dirname(os.path.dirname(HERE))
# Fast programs first: most mutants die in seconds.
ORDER = ["check_errors", "check_leap_array", "check_variants", "check_metric",
         "check_sliding_view", "check_node", "check_limiter", "check_cancel", "check_hot_path",
         "check_registry", "check_plugin", "check_keyed", "check_keyed_edges", "check_keyed_cancel",
         "check_keyed_damage", "check_keyed_kills", "check_bad_input", "check_alloc", "check_concurrency",
         "check_segment", "check_segment_files", "check_keyed_segment", "check_crash",
         "check_cluster", "check_breaker", "check_breaker_shared", "check_breaker_kill", "check_rules"]


def sh(cmd, cwd, timeout=None, quiet=True):
    out = subprocess.DEVNULL if quiet else None
    return subprocess.run(cmd, cwd=cwd, shell=True, stdout=out, stderr=out,
                          timeout=timeout).returncode


def load(path, pattern):
    mutants = []
    with open(path) as f:
        for n, line in enumerate(f, 1):
            line = line.rstrip("\n")
            if not line.strip() or line.startswith("#"):
                continue
            parts = line.split("\t")
            if len(parts) != 4:
                sys.exit("%s:%d: want 4 tab-separated fields, got %d" % (path, n, len(parts)))
            if pattern and not any(p in line for p in pattern):
                continue
            mutants.append((n,) + tuple(parts))
    return mutants


def run_tests(build, programs):
    """The first failing program, or None."""
    for p in programs:
        try:
            rc = sh("./tests/%s" % p, build, timeout=600)
        except subprocess.TimeoutExpired:
            return p + " (timeout)"
        if rc != 0:
            return p
    return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-k", dest="pattern", action="append",
                    help="only mutants whose line contains PATTERN (repeatable: any of them)")
    ap.add_argument("--keep", action="store_true", help="keep the scratch directory")
    args = ap.parse_args()
    mutants = load(os.path.join(HERE, "mutants.txt"), args.pattern)
    scratch = tempfile.mkdtemp(prefix="sw-mutation-")
    src, build = os.path.join(scratch, "src"), os.path.join(scratch, "build")
    try:
        files = subprocess.run(["git", "ls-files", "-z"], cwd=TOP, check=True,
                               capture_output=True).stdout.split(b"\0")
        for f in files:
            if not f:
                continue
            f = f.decode()
            if not os.path.isfile(os.path.join(TOP, f)):
                continue
            os.makedirs(os.path.dirname(os.path.join(src, f)) or src, exist_ok=True)
            shutil.copy2(os.path.join(TOP, f), os.path.join(src, f))
        os.makedirs(build)
        print("building the scratch copy in %s ..." % scratch, flush=True)
        if sh("autoreconf -fi", src) or sh(src + "/configure -q", build) or \
                sh("make -s -j%d && make -s -j%d check TESTS=" % (os.cpu_count(), os.cpu_count()), build):
            sys.exit("the scratch copy does not build")
        programs = [p for p in ORDER if os.path.exists(os.path.join(build, "tests", p))]
        failed = run_tests(build, programs)
        if failed:
            sys.exit("the unmutated suite fails (%s): fix that first" % failed)
        killed, survived, equivalent = 0, [], []
        for n, path, old, new, why in mutants:
            target = os.path.join(src, path)
            with open(target) as f:
                text = f.read()
            if text.count(old) != 1:
                sys.exit("mutants.txt:%d: %r occurs %d times in %s (want exactly once)"
                         % (n, old, text.count(old), path))
            with open(target, "w") as f:
                f.write(text.replace(old, new))
            t0 = time.time()
            try:
                if sh("make -s -j%d && make -s -j%d check TESTS=" % (os.cpu_count(), os.cpu_count()), build):
                    verdict = "killed (does not build)"
                else:
                    failed = run_tests(build, programs)
                    verdict = "killed by " + failed if failed else "SURVIVED"
            finally:
                with open(target, "w") as f:
                    f.write(text)
                os.utime(target)  # rebuild the original next time
            eq = why.startswith("equivalent:")
            print("%-40s %-30s %5.0fs  %s" % ("%s:%d" % (path, n), verdict, time.time() - t0, why),
                  flush=True)
            if eq:
                equivalent.append((n, path, why))
            elif verdict == "SURVIVED":
                survived.append((n, path, old, new, why))
            else:
                killed += 1
        total = killed + len(survived)
        print("\nscore: %d of %d non-equivalent mutants killed (%.1f%%); %d equivalent"
              % (killed, total, 100.0 * killed / max(total, 1), len(equivalent)))
        for n, path, old, new, why in survived:
            print("survived: mutants.txt:%d %s: %r -> %r (%s)" % (n, path, old, new, why))
        return 0 if total and killed * 100 >= 95 * total else 1
    finally:
        if not args.keep:
            shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
