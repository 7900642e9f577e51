#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# The Debian packages, as a user gets them (README.md, "Debian packages"):
#   1. the tree as a clone of it holds it (the files git knows), copied to a
#      temporary directory; its source package (dpkg-source) for lintian;
#   2. README.md's block run as written there: apt-get build-dep,
#      dpkg-buildpackage -us -uc -b, apt-get install of the .deb files (then
#      apt-get install ./*.deb, for any other package built);
#      DEB_BUILD_OPTIONS=nocheck: `make check` is the plain build's step of
#      tests/run-all.sh;
#   3. lintian on the source and binary packages: no error, no warning
#      (debian/source/lintian-overrides justifies what is left);
#   4. autopkgtest -- null: debian/tests, from outside the tree;
#   5. tests/packages/luarocks.sh (the rockspec, with libsw0 installed);
#   6. tools/check-versions.sh on the .deb files;
#   7. apt-get purge: every file the packages installed or made is gone, and
#      no file named like libsw appeared or went elsewhere.
# Packages of libsw installed before are purged first and this build's
# installed again at the end. The build and test dependencies stay, as
# everything tests/run-all.sh installs.
#
# Usage, as root: sh tests/packages/run.sh [OUT_DIR]   (OUT_DIR: keep the .deb files)
set -eu
top=$(cd "$(dirname "$0")/../.." && pwd)
out=${1:-}
[ "$(id -u)" = 0 ] || { echo "tests/packages/run.sh: run as root (it installs and purges packages)" >&2; exit 1; }
cd "$top"
. tools/deps.sh
t0=$(date +%s)
step() { printf '\n--- %s (%d s)\n' "$*" "$(($(date +%s) - t0))"; }
fail() { echo "tests/packages/run.sh: $*" >&2; exit 1; }

before=""
PKGS="libsw0 libsw-dev libsw-tools python3-libsw lua-libsw libnginx-mod-http-libsw"
work=$(mktemp -d /tmp/sw-packages.XXXXXX)
# nginx-core, when apt installs it, must not start the machine's nginx on port 80
made_policy=""
if [ ! -e /usr/sbin/policy-rc.d ]; then
  printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d
  chmod 755 /usr/sbin/policy-rc.d
  made_policy=1
fi
ours=""   # set while the packages this test installed may be installed
cleanup() {
  if [ -n "$ours" ] && [ -n "$(installed)" ]; then
    echo "tests/packages/run.sh: purging what it installed:" $(installed) >&2
    # shellcheck disable=SC2046
    sw_apt_get purge -y $(installed) >/dev/null 2>&1 || true
    [ -z "$before" ] || echo "tests/packages/run.sh: installed before the test and not again: $before" >&2
  fi
  [ -z "$made_policy" ] || rm -f /usr/sbin/policy-rc.d
  rm -rf "$work"
}
trap cleanup EXIT
# what the test runs (the build dependencies come from README.md's block)
# and what debian/tests needs, installed here rather than by autopkgtest
sw_need git dpkg-dev lintian autopkgtest luarocks curl gcc libc6-dev pkgconf luajit2 nginx-core \
  libnginx-mod-http-lua lua-resty-core
# apt-get as the README's reader runs it, answering yes
cat > "$work/apt.conf" <<'EOF'
APT::Get::Assume-Yes "true";
DPkg::Lock::Timeout "300";
quiet "2";
EOF
export APT_CONFIG="$work/apt.conf" DEBIAN_FRONTEND=noninteractive

installed() { dpkg-query -W -f='${Package} ${Status}\n' $PKGS 2>/dev/null | awk '/ok installed/ {print $1}'; }
# the files named like libsw's, outside /usr/local (make install's) and
# dpkg's and apt's databases
named() {
  find /usr /etc /var/lib -xdev \( -path /usr/local -o -path /var/lib/apt \) -prune -o \
    \( -iname '*libsw*' -o -name 'swctl*' -o -path /usr/include/sw \) -print 2>/dev/null | sort
}

step "the tree as a clone holds it, and its source package"
before=$(installed)
if [ -n "$before" ]; then
  echo "installed before the test, purged now and installed again (this build's) at the end:" $before
  sw_apt_get purge $before >/dev/null
fi
named > "$work/named.before"
src="$work/src/libsw-$(dpkg-parsechangelog -l debian/changelog -S Version)"
mkdir -p "$src"
git ls-files -z --cached --others --exclude-standard |
  xargs -0 sh -c 'for f; do [ ! -f "$f" ] || printf "%s\0" "$f"; done' sh | xargs -0 cp --parents -t "$src"
(cd "$work/src" && dpkg-source -b "$(basename "$src")" > "$work/source.log" 2>&1) ||
  { cat "$work/source.log"; fail "dpkg-source failed"; }

step "README.md's Debian packages block: build-dep, dpkg-buildpackage -us -uc -b, apt-get install"
block=$(/usr/bin/python3 - "$top" <<'EOF'
import sys
sys.path.insert(0, sys.argv[1] + "/tests/docs")
import doctest  # tests/docs/doctest.py: the page's blocks as its test sees them
blocks = [b for b in doctest.parse("README.md") if b.kind == "skip" and "tests/packages/run.sh" in b.reason]
assert len(blocks) == 1, "README.md: one block marked as run by tests/packages/run.sh, not %d" % len(blocks)
print(blocks[0].code, end="")
EOF
)
printf '%s\n' "$block" | sed 's/^/    /'
sw_apt_get update -qq
ours=1
(cd "$src" && DEB_BUILD_OPTIONS="nocheck parallel=$(nproc)" sh -e -c "$block") > "$work/build.log" 2>&1 ||
  { tail -n 60 "$work/build.log"; fail "README.md's block failed (log above)"; }
grep -E "^dpkg-deb: building package" "$work/build.log" | sed "s|'\.\./|'|"
cd "$work/src"
debs=$(ls ./*.deb | grep -v -- '-dbgsym_')
# shellcheck disable=SC2086 # the file names have no blanks
apt-get install $debs > "$work/install.log" 2>&1 || { cat "$work/install.log"; fail "apt-get install ./*.deb failed"; }
now=$(installed)
echo "installed:" $now
for d in $debs; do ls -l "$d" | awk '{printf "  %-44s %7d bytes\n", $9, $5}'; done
for p in $now; do dpkg -L "$p"; done | sort -u > "$work/files"
cd "$top"

step "lintian"
lintian -I --pedantic --fail-on error,warning "$work"/src/libsw_*.dsc "$work"/src/libsw_*.changes \
  > "$work/lintian.log" 2>&1 || { cat "$work/lintian.log"; fail "lintian found errors or warnings"; }
grep -v "running with root privileges" "$work/lintian.log" || echo "lintian: no tag (info and pedantic shown)"

step "autopkgtest -- null: debian/tests on the installed packages"
autopkgtest -B "$src" -- null > "$work/autopkgtest.log" 2>&1 && rc=0 || rc=$?
summary=$(sed -n '/@@@@ summary/,$p' "$work/autopkgtest.log" | sed 1d)
echo "$summary"
# every test passes (2 would be a test skipped: the nginx module's, were its package not built)
if [ "$rc" -ne 0 ]; then
  grep -v "^Reading\|^Building\|^Get:\|^Selecting\|Preparing\|Unpacking\|Setting up" "$work/autopkgtest.log" | tail -n 80
  fail "autopkgtest: status $rc"
fi

shm=$(ls /dev/shm | grep pkgtest || true)
[ -z "$shm" ] || fail "debian/tests left segments in /dev/shm: $shm"

step "the rockspec with libsw0 installed"
sh tests/packages/luarocks.sh

step "the versions of the packages"
sh tools/check-versions.sh "$work"/src/*.deb

step "apt-get purge"
# shellcheck disable=SC2086
sw_apt_get purge $now > "$work/purge.log" 2>&1 || { cat "$work/purge.log"; fail "apt-get purge failed"; }
ours=""
[ -z "$(installed)" ] || fail "still installed after the purge: $(installed)"
left=$(while read -r f; do
  [ -d "$f" ] || [ ! -e "$f" ] || echo "$f"
  # a directory that only the packages made
  [ ! -d "$f" ] || grep -qxF "$f" "$work/named.before" || case "$f" in *libsw*|/usr/include/sw) echo "$f" ;; esac
done < "$work/files")
named > "$work/named.after"
changed=$(diff "$work/named.before" "$work/named.after" || true)
[ -z "$left" ] || { echo "$left"; fail "the purge left the files above"; }
[ -z "$changed" ] || { echo "$changed"; fail "files named like libsw appeared or went (diff of before and after)"; }
echo "purged: none of the $(wc -l < "$work/files") paths the packages listed is left, and no file named like libsw"

if [ -n "$before" ]; then
  step "installing again what was installed before (this build's)"
  cd "$work/src"
  # shellcheck disable=SC2086
  sw_apt_get install $(for p in $before; do ls ./"${p}"_*.deb; done) >/dev/null
  cd "$top"
fi
if [ -n "$out" ]; then
  mkdir -p "$out"
  cp "$work"/src/*.deb "$work"/src/*.changes "$work"/src/*.dsc "$work"/src/*.tar.xz "$out"/
  cp "$work/lintian.log" "$work/autopkgtest.log" "$out"/
fi
step "Debian packages: built, lintian-clean, installed, tested and purged"
