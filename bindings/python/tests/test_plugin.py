# SPDX-License-Identifier: Apache-2.0
"""A bucket-type plugin (examples/plugin/histogram.c) loaded into the module."""
import pytest

import libsw


def test_histogram_plugin(histogram_plugin):
    fields = libsw.bucket_type_fields("example.histogram")
    assert fields[0] == "le0ms" and fields[-1] == "inf" and len(fields) == 16
    la = libsw.LeapArray("example.histogram", 2, 1000)
    assert la.fields == fields
    t = 5_000_000
    for latency in (0, 1, 5, 5, 100, 70000):
        la.add("le0ms", latency, now=t)  # field 0 records one latency
    assert la.sum("le0ms", now=t) == 1
    assert la.sum("le1ms", now=t) == 1
    assert la.sum("le7ms", now=t) == 2
    assert la.sum("le127ms", now=t) == 1
    assert la.sum("inf", now=t) == 1
    la.add("le7ms", 10, now=t + 500)  # another field adds directly
    assert la.sum("le7ms", now=t + 500) == 12
    ws = la.windows(now=t + 500)
    assert [w.values["le7ms"] for w in ws] == [2, 10]


def test_plugin_loaded_twice(histogram_plugin):
    with pytest.raises(libsw.AlreadyExistsError, match="already registered"):
        libsw.load_plugin(histogram_plugin)


def test_plugin_errors(tmp_path):
    with pytest.raises(libsw.PluginError):
        libsw.load_plugin(str(tmp_path / "missing.so"))
    bad = tmp_path / "not-a-plugin.so"
    bad.write_bytes(b"\x7fELF garbage")
    with pytest.raises(libsw.PluginError) as ei:
        libsw.load_plugin(bad)
    assert ei.value.code_name == "SW_EPLUGIN"
    with pytest.raises(TypeError):
        libsw.load_plugin(42)
    with pytest.raises(LookupError):
        libsw.bucket_type_fields("no.such")
