# SPDX-License-Identifier: Apache-2.0
"""Build of the libsw Python package: the C core is compiled into libsw._libsw
through CFFI (out-of-line API mode); see build_libsw.py."""
import cffi  # noqa: F401  (first: a missing cffi must fail loudly, not half-build)

import glob
import os
import shutil
import sys

from setuptools import setup
from setuptools.command.sdist import sdist

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from build_libsw import libsw_source_dir, libsw_sources, libsw_version  # noqa: E402


class sdist_with_sources(sdist):
    """A source archive builds anywhere: copy the C sources into vendor/."""

    def make_release_tree(self, base_dir, files):
        super().make_release_tree(base_dir, files)
        src = libsw_source_dir()
        dst = os.path.join(base_dir, "vendor", "libsw")
        os.makedirs(os.path.join(dst, "sw"), exist_ok=True)
        # the C files and headers, layer folders (keyed/) included
        for path in glob.glob(os.path.join(src, "**", "*.[ch]"), recursive=True):
            rel = os.path.relpath(path, src)
            if rel.startswith("sw" + os.sep):
                continue  # the public headers: below
            os.makedirs(os.path.dirname(os.path.join(dst, rel)), exist_ok=True)
            shutil.copy2(path, os.path.join(dst, rel))
        for name in ("sw.h", "plugin.h", "version.h.in"):
            shutil.copy2(os.path.join(src, "sw", name), os.path.join(dst, "sw"))
        with open(os.path.join(base_dir, "vendor", "VERSION"), "w") as f:
            f.write(libsw_version(src) + "\n")
        with open(os.path.join(base_dir, "vendor", "SOURCES"), "w") as f:
            f.write("\n".join(os.path.relpath(p, src) for p in libsw_sources(src)) + "\n")


setup(
    version=libsw_version(),
    cffi_modules=["build_libsw.py:ffibuilder"],
    cmdclass={"sdist": sdist_with_sources},
    zip_safe=False,
)
