#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# The Python package as a package index serves it (README.md, "Python:
# sdist and wheel"):
#   1. `python3 -m build --no-isolation` (Debian's python3-build), offline:
#      the sdist from the tree, then the wheel from the unpacked sdist
#      (build's default), so the sdist builds from its own contents;
#   2. their metadata: name, version (tools/check-versions.sh), licence
#      and its files, URLs, classifiers, py.typed and the stubs; the C
#      sources inside the sdist; the keyed tables' 16-byte CAS compiled
#      inline (-mcx16: cmpxchg16b) on x86-64;
#   3. the wheel installed into a fresh venv of Debian's python3 (pytest,
#      cffi and the web frameworks from Debian, as system site packages)
#      and the binding's test suite, from the sdist, run there, in a mount
#      namespace where the tree is an empty directory: a machine with no
#      clone.
# Usage, as root: sh tests/packages/python-dist.sh [OUT_DIR]   (OUT_DIR: keep the sdist and wheel)
set -eu
top=$(cd "$(dirname "$0")/../.." && pwd)
out=${1:-}
cd "$top"
. tools/deps.sh
# the binding's suite needs what bindings/python/run-tests.sh installs (its DEBS)
eval "$(sed -n '/^DEBS=/,/^$/p' bindings/python/run-tests.sh)"
[ -n "${DEBS:-}" ] || { echo "python-dist.sh: no DEBS list in bindings/python/run-tests.sh" >&2; exit 1; }
# shellcheck disable=SC2086
sw_need python3-build binutils redis-server $DEBS
unset PYTHONPATH PYTHONHOME LIBSW_SOURCE_DIR PIP_REQUIRE_VIRTUALENV || true
work=$(mktemp -d /tmp/sw-pydist.XXXXXX)
trap 'rm -rf "$work"' EXIT
fail() { echo "python-dist.sh: $*" >&2; exit 1; }

echo "--- python3 -m build: the sdist, and the wheel from it"
/usr/bin/python3 -m build --no-isolation --outdir "$work/dist" bindings/python > "$work/build.log" 2>&1 ||
  { tail -n 40 "$work/build.log"; fail "python3 -m build failed"; }
rm -rf bindings/python/build/lib* bindings/python/src/libsw.egg-info   # what the sdist step leaves in the tree
sdist=$(ls "$work"/dist/libsw-*.tar.gz)
wheel=$(ls "$work"/dist/libsw-*.whl)
ls -l "$sdist" "$wheel" | awk '{printf "  %-50s %8d bytes\n", $9, $5}' | sed "s|$work/dist/||"
sh tools/check-versions.sh "$sdist" "$wheel" | tail -n 3

echo "--- metadata"
/usr/bin/python3 - "$sdist" "$wheel" <<'EOF'
import email.parser
import sys
import tarfile
import zipfile

sdist, wheel = sys.argv[1:]
with tarfile.open(sdist) as t:
    snames = t.getnames()
    root = snames[0].split("/")[0]
    pkg_info = t.extractfile(root + "/PKG-INFO").read().decode()
    vendored = t.extractfile(root + "/vendor/VERSION").read().decode().strip()
with zipfile.ZipFile(wheel) as z:
    wnames = z.namelist()
    dist_info = next(n.split("/")[0] for n in wnames if n.endswith(".dist-info/METADATA"))
    metadata = z.read(dist_info + "/METADATA").decode()

problems = []
for what, text in (("sdist PKG-INFO", pkg_info), ("wheel METADATA", metadata)):
    m = email.parser.Parser().parsestr(text)
    urls = dict(u.split(", ", 1) for u in m.get_all("Project-URL") or [])
    classifiers = m.get_all("Classifier") or []
    want = {
        "Name is libsw": m["Name"] == "libsw",
        "License is Apache-2.0": m["License"] == "Apache-2.0",
        "licence classifier": "License :: OSI Approved :: Apache Software License" in classifiers,
        "Typing :: Typed": "Typing :: Typed" in classifiers,
        "a Python 3 classifier": "Programming Language :: Python :: 3" in classifiers,
        "URLs (Homepage, Documentation, Source, Issues)":
            all(urls.get(k, "").startswith("https://") for k in ("Homepage", "Documentation", "Source", "Issues")),
        "Requires-Python": bool(m["Requires-Python"]),
        # (setuptools writes an sdist's requirements in its egg-info, not in PKG-INFO)
        "Requires-Dist cffi": what.startswith("sdist") or
            any(r.startswith("cffi") for r in m.get_all("Requires-Dist") or []),
        "a description (README.md)": len(m.get_payload() or "") > 200,
    }
    problems += ["%s: %s" % (what, k) for k, ok in want.items() if not ok]
    print("  %s: %s %s, %d classifiers, URLs %s" % (what, m["Name"], m["Version"], len(classifiers),
                                                   ", ".join(sorted(urls))))
    if m["Version"] != vendored:
        problems.append("%s: version %s, vendor/VERSION %s" % (what, m["Version"], vendored))
for f in ("LICENSE", "NOTICE", "vendor/libsw/sw/sw.h", "vendor/SOURCES", "pyproject.toml",
          "src/libsw/py.typed", "tests/conftest.py"):
    if root + "/" + f not in snames:
        problems.append("sdist: no " + f)
for f in (dist_info + "/LICENSE", dist_info + "/NOTICE", "libsw/py.typed", "libsw/_libsw.pyi"):
    if f not in wnames:
        problems.append("wheel: no " + f)
if not any(n.startswith("libsw/_libsw.") and n.endswith(".so") for n in wnames):
    problems.append("wheel: no compiled extension libsw/_libsw*.so")
print("  sdist: %d files (C sources in vendor/libsw: %d); wheel: %d files"
      % (len(snames), sum(1 for n in snames if "/vendor/libsw/" in n and n.endswith(".c")), len(wnames)))
if problems:
    sys.exit("metadata:\n  " + "\n  ".join(problems))
EOF
mkdir -p "$work/app"
(cd "$work/app" && /usr/bin/python3 -m zipfile -e "$wheel" wheel >/dev/null)
if [ "$(uname -m)" = x86_64 ]; then
  n=$(objdump -d "$work"/app/wheel/libsw/_libsw*.so | grep -c cmpxchg16b || true)
  [ "$n" -gt 0 ] || fail "the wheel's extension has no cmpxchg16b: built without -mcx16"
  echo "  the extension: $n cmpxchg16b (-mcx16)"
fi

echo "--- the wheel in a fresh venv, the suite from the sdist, with no clone"
tar -xzf "$sdist" -C "$work"
sdir=$(ls -d "$work"/libsw-*/)
cp -r "$sdir/tests" "$sdir/pyproject.toml" "$work/app/"
cp "$wheel" "$work/app/"
rm -rf "$sdir" "$work/app/wheel"
cat > "$work/app/run.sh" <<'EOF'
set -eu
cd "$(dirname "$0")"
/usr/bin/python3 -m venv --system-site-packages venv
venv/bin/pip install -q --no-index ./libsw-*.whl
venv/bin/python -c 'import libsw, sys; f = libsw.__file__; print("  libsw", libsw.__version__, "from", f); sys.exit(0 if "/venv/lib/" in f else 1)'
exec venv/bin/python -m pytest -q -p no:cacheprovider tests
EOF
# the tree hidden under an empty directory: nothing can come from the clone
unshare --mount --propagation private sh -c 'mount -t tmpfs tmpfs "$1" && ls -A "$1" | wc -l | grep -qx 0 &&
  exec sh "$2/run.sh"' sh "$top" "$work/app" > "$work/pytest.log" 2>&1 && rc=0 || rc=$?
grep -E "^  libsw |passed|failed|error" "$work/pytest.log" | tail -n 5
if [ "$rc" -ne 0 ]; then
  grep -E "^(FAILED|ERROR)" "$work/pytest.log" | head -n 30
  fail "the binding's tests failed with the wheel (status $rc)"
fi
if [ -n "$out" ]; then mkdir -p "$out" && cp "$sdist" "$wheel" "$out"/; fi
echo "python-dist.sh: sdist and wheel built offline, metadata complete, the wheel passes the suite with no clone"
