# SPDX-License-Identifier: Apache-2.0
import os
import shutil
import subprocess
import uuid

import pytest

import libsw

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", "..", ".."))

T0 = 10_000_000  # a simulated time (ms) on a second boundary


@pytest.fixture
def clock():
    return libsw.ManualClock(T0)


@pytest.fixture
def shm_name():
    """A unique POSIX shared memory name, removed afterwards."""
    name = "libsw-pytest-%d-%s" % (os.getpid(), uuid.uuid4().hex[:8])
    yield name
    libsw.unlink_segment(name)


def _find_libsw_include():
    for d in (os.environ.get("LIBSW_SOURCE_DIR"), os.path.join(REPO, "libsw")):
        if d and os.path.isfile(os.path.join(d, "sw", "plugin.h")):
            return d
    return None


@pytest.fixture(scope="session")
def histogram_plugin(tmp_path_factory):
    """examples/plugin/histogram.c built into a shared object, loaded once."""
    src = os.path.join(REPO, "examples", "plugin", "histogram.c")
    inc = _find_libsw_include()
    cc = shutil.which(os.environ.get("CC", "cc")) or shutil.which("gcc")
    if not os.path.isfile(src) or inc is None or cc is None:
        pytest.skip("needs the libsw repository (examples/plugin/histogram.c) and a C compiler")
    out = tmp_path_factory.mktemp("plugin") / "sw_histogram.so"
    subprocess.run([cc, "-shared", "-fPIC", "-O2", "-I" + inc, src, "-o", str(out)], check=True)
    assert libsw.load_plugin(str(out)) == 1
    return str(out)


# No example database in whatever directory pytest runs from.
try:
    from hypothesis import settings as _hsettings

    _hsettings.register_profile("libsw", database=None)
    _hsettings.load_profile("libsw")
except ImportError:  # pragma: no cover
    pass
