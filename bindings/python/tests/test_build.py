# SPDX-License-Identifier: Apache-2.0
"""The package is the compiled CFFI extension with the C core inside."""
import importlib.util
import os
import re
import threading

import libsw
import libsw._libsw as ext
from conftest import REPO


def test_extension_is_compiled():
    assert ext.__file__.endswith(".so")
    assert hasattr(ext, "ffi") and hasattr(ext, "lib")
    assert libsw.ffi is ext.ffi and libsw.lib is ext.lib
    spec = importlib.util.find_spec("libsw._libsw")
    assert spec.origin.endswith(".so")
    # the C core is inside the module: its functions resolve without a libsw.so
    assert ext.lib.sw_version() == (libsw.version_info[0] << 16) | (libsw.version_info[1] << 8) | libsw.version_info[2]


def test_version_matches_configure_ac():
    path = os.path.join(REPO, "configure.ac")
    if not os.path.exists(path):
        return
    with open(path) as f:
        m = re.search(r"AC_INIT\(\[libsw\],\s*\[([0-9.]+)\]", f.read())
    assert m and libsw.__version__ == m.group(1)
    assert libsw.__version__ == "%d.%d.%d" % libsw.version_info


def test_typed_package():
    pkg = os.path.dirname(libsw.__file__)
    assert os.path.exists(os.path.join(pkg, "py.typed"))


def test_c_calls_release_the_gil():
    # swpy_gil_held() runs PyGILState_Check() inside the C call: 0 means the
    # call was made with the GIL released (CFFI API mode does so for every
    # function of the cdef).
    assert ext.lib.swpy_gil_held() == 0
    seen = []
    t = threading.Thread(target=lambda: seen.append(ext.lib.swpy_gil_held()))
    t.start()
    t.join()
    assert seen == [0]


def test_now_ms_is_monotonic():
    a = libsw.now_ms()
    b = libsw.now_ms()
    assert 0 <= a <= b


def test_wheel_metadata():
    # what pip show and a package index display: licence, URLs, classifiers
    from importlib import metadata

    meta = metadata.metadata("libsw")
    assert meta["License"] == "Apache-2.0"
    assert "License :: OSI Approved :: Apache Software License" in meta.get_all("Classifier")
    assert meta["Summary"].startswith("Sentinel-style")
    urls = dict(u.split(", ", 1) for u in meta.get_all("Project-URL"))
    assert urls["Homepage"].startswith("https://") and "example.invalid" not in urls["Homepage"]
    files = [str(f) for f in metadata.files("libsw")]
    assert any(f.endswith("LICENSE") for f in files), files
    assert any(f.endswith("NOTICE") for f in files), files
