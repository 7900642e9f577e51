# SPDX-License-Identifier: Apache-2.0
"""CFFI builder of libsw._libsw (out-of-line API mode).

The C core of libsw (libsw/*.c of the repository) is compiled into the
extension module itself, so installing the package needs no system-wide
libsw. setup.py names this file in ``cffi_modules``; it can also be run
directly (``python build_libsw.py``) to build the module in place for
debugging.

Sources are looked up, in order, in:
  1. $LIBSW_SOURCE_DIR (a directory holding sw/sw.h and the *.c files);
  2. ../../libsw relative to this file (the repository layout);
  3. ./vendor/libsw (what ``setup.py sdist`` copies into a source archive).
The C files are those of libsw_libsw_la_SOURCES in Makefile.am next to that
libsw directory, outside automake conditionals (or vendor/SOURCES). The
version comes from the AC_INIT line of configure.ac (or vendor/VERSION);
<sw/version.h> and config.h, which configure normally generates, are written
into build/generated/ (config.h with no optional feature).
"""
from __future__ import annotations

import glob
import os
import platform
import subprocess
import re

from cffi import FFI

HERE = os.path.dirname(os.path.abspath(__file__))


def libsw_source_dir() -> str:
    candidates = []
    env = os.environ.get("LIBSW_SOURCE_DIR")
    if env:
        candidates.append(env)
    candidates.append(os.path.join(HERE, "..", "..", "libsw"))
    candidates.append(os.path.join(HERE, "vendor", "libsw"))
    for c in candidates:
        c = os.path.abspath(c)
        if os.path.isfile(os.path.join(c, "sw", "sw.h")) and glob.glob(os.path.join(c, "*.c")):
            return c
    raise RuntimeError(
        "libsw C sources not found (looked in: %s); set LIBSW_SOURCE_DIR to the libsw/ "
        "directory of the libsw repository" % ", ".join(os.path.abspath(c) for c in candidates)
    )


_AC_INIT = re.compile(r"AC_INIT\(\s*\[?[^,\]]*\]?\s*,\s*\[?\s*([0-9]+)\.([0-9]+)\.([0-9]+)")


def libsw_version(src_dir: str | None = None) -> str:
    src_dir = src_dir or libsw_source_dir()
    for path in (os.path.join(src_dir, "..", "configure.ac"), os.path.join(src_dir, "..", "VERSION")):
        if not os.path.isfile(path):
            continue
        with open(path, encoding="utf-8") as f:
            text = f.read()
        if path.endswith("VERSION"):
            m = re.match(r"\s*([0-9]+)\.([0-9]+)\.([0-9]+)", text)
        else:
            m = _AC_INIT.search(text)
        if m:
            return "%s.%s.%s" % m.groups()
    raise RuntimeError("cannot find the libsw version (AC_INIT in configure.ac) near " + src_dir)


def _parse_makefile_am_sources(path: str) -> list:
    """The .c files of libsw_libsw_la_SOURCES in Makefile.am, from the
    assignments outside any automake conditional (what a configure without
    optional features builds), relative to libsw/ (a layer's folder, e.g.
    keyed/table.c, kept)."""
    with open(path, encoding="utf-8") as f:
        text = f.read().replace("\\\n", " ")
    depth = 0
    out = []
    for line in text.splitlines():
        word = line.split("#", 1)[0].strip()
        if re.match(r"if\s", word):
            depth += 1
            continue
        if word == "endif" or word.startswith("endif "):
            depth -= 1
            continue
        m = re.match(r"libsw_libsw_la_SOURCES\s*\+?=(.*)$", word)
        if m and depth == 0:
            out += [t[len("libsw/"):] if t.startswith("libsw/") else t
                    for t in m.group(1).split() if t.endswith(".c")]
    return out


def libsw_sources(src_dir: str) -> list:
    """Absolute paths of the C files of the library, as the build system
    lists them (Makefile.am, or SOURCES beside a vendored copy); every *.c
    only when neither exists."""
    names = None
    am = os.path.join(src_dir, "..", "Makefile.am")
    listing = os.path.join(src_dir, "..", "SOURCES")
    if os.path.isfile(am):
        names = _parse_makefile_am_sources(am)
    elif os.path.isfile(listing):
        with open(listing, encoding="utf-8") as f:
            names = f.read().split()
    if not names:
        return sorted(glob.glob(os.path.join(src_dir, "**", "*.c"), recursive=True))
    paths = [os.path.join(src_dir, n) for n in names]
    missing = [p for p in paths if not os.path.isfile(p)]
    if missing:
        raise RuntimeError("libsw sources listed but missing: " + ", ".join(missing))
    return paths


def pkg_flags(module: str) -> tuple:
    """(include dirs, libs) of module from pkg-config, or None when it is
    absent: then the extension is built without what needs it, as configure
    would (hiredis: cluster rules; jansson: rules as JSON)."""
    try:
        out = subprocess.run(["pkg-config", "--cflags", "--libs", module], check=True,
                             capture_output=True, text=True).stdout.split()
    except (OSError, subprocess.CalledProcessError):
        return None
    cflags = [f[2:] for f in out if f.startswith("-I")]
    libs = [f[2:] for f in out if f.startswith("-l")]
    return cflags, libs


HIREDIS = pkg_flags("hiredis")
JANSSON = pkg_flags("jansson")
OPTIONAL = [f for f in (HIREDIS, JANSSON) if f]


def generate_config_header(out_root: str, version: str) -> None:
    """A config.h as configure would write it: hiredis (cluster rules) and
    jansson (rules as JSON) when pkg-config finds them, no other optional
    feature."""
    text = (
        "/* config.h for the Python build of libsw (generated by build_libsw.py). */\n"
        + ("#define SW_HAVE_HIREDIS 1\n" if HIREDIS else "")
        + ("#define SW_HAVE_JANSSON 1\n" if JANSSON else "") +
        "#define PACKAGE \"libsw\"\n#define PACKAGE_NAME \"libsw\"\n"
        "#define PACKAGE_TARNAME \"libsw\"\n#define PACKAGE_BUGREPORT \"\"\n#define PACKAGE_URL \"\"\n"
        "#define PACKAGE_VERSION \"%s\"\n#define VERSION \"%s\"\n"
        "#define PACKAGE_STRING \"libsw %s\"\n"
        "#define HAVE_DLFCN_H 1\n#define HAVE_INTTYPES_H 1\n#define HAVE_STDINT_H 1\n"
        "#define HAVE_STDIO_H 1\n#define HAVE_STDLIB_H 1\n#define HAVE_STRINGS_H 1\n"
        "#define HAVE_STRING_H 1\n#define HAVE_SYS_STAT_H 1\n#define HAVE_SYS_TYPES_H 1\n"
        "#define HAVE_UNISTD_H 1\n#define STDC_HEADERS 1\n" % (version, version, version)
    )
    _write_if_changed(os.path.join(out_root, "config.h"), text)


def _write_if_changed(path: str, text: str) -> None:
    old = None
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            old = f.read()
    if old != text:  # keep the timestamp when nothing changed
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)


def generate_version_header(out_root: str, version: str) -> str:
    """Write <out_root>/sw/version.h from sw/version.h.in; return out_root."""
    src_dir = libsw_source_dir()
    major, minor, patch = version.split(".")
    with open(os.path.join(src_dir, "sw", "version.h.in"), encoding="utf-8") as f:
        text = f.read()
    for key, value in (
        ("SW_VERSION_MAJOR", major),
        ("SW_VERSION_MINOR", minor),
        ("SW_VERSION_PATCH", patch),
        ("PACKAGE_VERSION", version),
    ):
        text = text.replace("@%s@" % key, value)
    if "@" in text:
        raise RuntimeError("sw/version.h.in has an unknown substitution: " + text)
    os.makedirs(os.path.join(out_root, "sw"), exist_ok=True)
    _write_if_changed(os.path.join(out_root, "sw", "version.h"), text)
    generate_config_header(out_root, version)
    return out_root


# The part of <sw/sw.h> and <sw/plugin.h> the binding uses. CFFI cannot parse
# the headers' macros (SW_API, the X-macro error table), hence a curated copy;
# '...' lets the C compiler supply values and layouts, so a mismatch with the
# real header is a compile error, never a silent ABI break.
CDEF = r"""
/* errors */
typedef enum sw_err {
  SW_OK, SW_EINVAL, SW_ENULL, SW_ENOMEM, SW_ESIZE, SW_EOVERFLOW, SW_ETIME, SW_ERANGE,
  SW_ENOTFOUND, SW_EEXIST, SW_EFULL, SW_EABI, SW_EPLUGIN, SW_EVERSION, SW_EGEOMETRY,
  SW_ECORRUPT, SW_EFOREIGN, SW_EIO, SW_EPERM, SW_ENOTSUP, SW_ESTATE, SW_ETYPE, SW_EBUSY, ...
} sw_err;
const char *sw_strerror(int err);
const char *sw_err_name(int err);
const char *sw_last_error(void);

/* version */
#define SW_VERSION_MAJOR ...
#define SW_VERSION_MINOR ...
#define SW_VERSION_PATCH ...
#define SW_VERSION_HEX ...
#define SW_PLUGIN_ABI_VERSION ...
uint32_t sw_version(void);
const char *sw_version_string(void);

/* clock */
#define SW_CLOCK_MONOTONIC ...
#define SW_CLOCK_MONOTONIC_COARSE ...
#define SW_CLOCK_DEFAULT ...
int64_t sw_now_ms(void);
int64_t sw_now_ns(void);
int64_t sw_clock_resolution_ns(void);
int sw_clock_use(uint32_t source);

/* options */
typedef struct sw_options sw_options;
#define SW_GRADE_CONCURRENCY ...
#define SW_GRADE_QPS ...
#define SW_BEHAVIOR_REJECT ...
#define SW_BEHAVIOR_WARM_UP ...
#define SW_BEHAVIOR_PACING ...
#define SW_BEHAVIOR_WARM_UP_PACING ...
typedef enum sw_option {
  SW_OPT_OCCUPIABLE, SW_OPT_STRIPES, SW_OPT_MAX_RT_MS, SW_OPT_SECOND_SAMPLE_COUNT,
  SW_OPT_SECOND_INTERVAL_MS, SW_OPT_MINUTE_SAMPLE_COUNT, SW_OPT_MINUTE_INTERVAL_MS,
  SW_OPT_OCCUPY_TIMEOUT_MS, SW_OPT_GRADE, SW_OPT_BEHAVIOR, SW_OPT_THRESHOLD,
  SW_OPT_MAX_QUEUE_MS, SW_OPT_WARM_UP_SEC, SW_OPT_COLD_FACTOR, SW_OPT_STRICT,
  SW_OPT_SEGMENT_MODE, SW_OPT_SEGMENT_UID, SW_OPT_SEGMENT_GID,
  SW_OPT_CLUSTER, SW_OPT_CLUSTER_LEASE, SW_OPT_CLUSTER_FAILURE, SW_OPT_CLUSTER_NODES,
  SW_OPT_CLUSTER_TIMEOUT_MS, SW_OPT_CLUSTER_RETRY_MS, SW_OPT_CLUSTER_LOW_WATER_PCT,
  SW_OPT_DRY_RUN, SW_OPT_SEGMENT_MAX_MB, SW_OPT_KEY_BYTES, SW_OPT_KEYED_ON_FULL,
  SW_OPT_BREAKER_STRATEGY, SW_OPT_BREAKER_COUNT, SW_OPT_BREAKER_SLOW_RATIO,
  SW_OPT_BREAKER_TIME_WINDOW_SEC, SW_OPT_BREAKER_MIN_REQUESTS, SW_OPT_BREAKER_STAT_INTERVAL_MS,
  SW_OPT_BREAKER_SAMPLE_COUNT, SW_OPT_BREAKER_HALF_OPEN_CALLS, SW_OPT_BREAKER_PROBE_TIMEOUT_MS, ...
} sw_option;
#define SW_FULL_EVICT ...
#define SW_FULL_OPEN ...
#define SW_FULL_CLOSED ...
int sw_options_create(sw_options **out);
void sw_options_free(sw_options *opts);
sw_options *sw_options_clone(const sw_options *opts);
int sw_options_set(sw_options *opts, sw_option key, int64_t value);
int sw_options_set_double(sw_options *opts, sw_option key, double value);
int sw_options_get(const sw_options *opts, sw_option key, int64_t *value);
int sw_options_get_double(const sw_options *opts, sw_option key, double *value);
int sw_option_bounds(sw_option key, double *min, double *max, double *def);
const char *sw_option_name(sw_option key);

/* plugin ABI */
#define SW_WINDOW_DETACHED ...
#define SW_FIELD_SUM ...
#define SW_FIELD_MIN ...
#define SW_FIELD_MAX ...
typedef struct sw_window {
  int64_t start_ms;
  int64_t length_ms;
  void *bucket;
  uint32_t flags;
  uint32_t slot;
  ...;
} sw_window;
typedef struct sw_bucket_type {
  uint32_t abi_version;
  uint32_t struct_size;
  const char *name;
  uint32_t bucket_size;
  uint32_t bucket_align;
  uint32_t field_count;
  const char *const *field_names;
  const uint8_t *field_kinds;
  int64_t (*get)(void *ctx, const void *bucket, uint32_t field);
  ...;
} sw_bucket_type;
const sw_bucket_type *sw_bucket_type_find(const char *name);
int sw_plugin_load(const char *path, uint32_t *registered);

/* leap array */
typedef struct sw_leap_array sw_leap_array;
int sw_leap_array_create_by_name(sw_leap_array **out, const char *type_name, void *ctx,
                                 int32_t sample_count, int64_t interval_ms);
void sw_leap_array_free(sw_leap_array *la);
int32_t sw_leap_array_sample_count(const sw_leap_array *la);
int64_t sw_leap_array_interval_ms(const sw_leap_array *la);
int64_t sw_leap_array_window_length_ms(const sw_leap_array *la);
const sw_bucket_type *sw_leap_array_type(const sw_leap_array *la);
int64_t sw_leap_array_detached_count(const sw_leap_array *la);
int sw_leap_array_time_index(const sw_leap_array *la, int64_t t, int32_t *idx);
int sw_leap_array_window_start(const sw_leap_array *la, int64_t t, int64_t *start);
int sw_leap_array_current_window(sw_leap_array *la, sw_window *out);
int sw_leap_array_current_window_at(sw_leap_array *la, int64_t t, sw_window *out);
int sw_leap_array_previous_window(const sw_leap_array *la, sw_window *out);
int sw_leap_array_previous_window_at(const sw_leap_array *la, int64_t t, sw_window *out);
int sw_leap_array_window_value_at(const sw_leap_array *la, int64_t t, sw_window *out);
int sw_leap_array_is_window_deprecated_at(const sw_leap_array *la, int64_t t, int64_t start_ms);
int sw_leap_array_valid_head(const sw_leap_array *la, sw_window *out);
int sw_leap_array_valid_head_at(const sw_leap_array *la, int64_t t, sw_window *out);
int sw_leap_array_list(const sw_leap_array *la, sw_window *out, uint32_t cap);
int sw_leap_array_list_at(const sw_leap_array *la, int64_t t, sw_window *out, uint32_t cap);
int sw_leap_array_list_all(const sw_leap_array *la, sw_window *out, uint32_t cap);
int sw_leap_array_add(sw_leap_array *la, uint32_t field, int64_t n);
int sw_leap_array_add_at(sw_leap_array *la, int64_t t, uint32_t field, int64_t n);
int sw_leap_array_sum_at(const sw_leap_array *la, int64_t t, uint32_t field, int64_t *out);

/* metric */
typedef enum sw_event {
  SW_EVENT_PASS, SW_EVENT_BLOCK, SW_EVENT_EXCEPTION, SW_EVENT_SUCCESS, SW_EVENT_RT,
  SW_EVENT_OCCUPIED_PASS, SW_EVENT_COUNT, ...
} sw_event;
#define SW_FIELD_MIN_RT ...
typedef struct sw_metric_record {
  int64_t start_ms;
  int64_t pass;
  int64_t block;
  int64_t exception;
  int64_t success;
  int64_t rt;
  int64_t occupied_pass;
  int64_t min_rt;
  ...;
} sw_metric_record;
int64_t sw_metric_bucket_get(const sw_leap_array *la, const void *bucket, uint32_t field);
typedef struct sw_metric sw_metric;
int sw_metric_create(sw_metric **out, int32_t sample_count, int64_t interval_ms,
                     const sw_options *opts);
void sw_metric_free(sw_metric *m);
sw_leap_array *sw_metric_leap_array(sw_metric *m);
int64_t sw_metric_pass(const sw_metric *m);
int64_t sw_metric_pass_at(const sw_metric *m, int64_t t);
int64_t sw_metric_block(const sw_metric *m);
int64_t sw_metric_block_at(const sw_metric *m, int64_t t);
int64_t sw_metric_exception(const sw_metric *m);
int64_t sw_metric_exception_at(const sw_metric *m, int64_t t);
int64_t sw_metric_success(const sw_metric *m);
int64_t sw_metric_success_at(const sw_metric *m, int64_t t);
int64_t sw_metric_rt(const sw_metric *m);
int64_t sw_metric_rt_at(const sw_metric *m, int64_t t);
int64_t sw_metric_occupied_pass(const sw_metric *m);
int64_t sw_metric_occupied_pass_at(const sw_metric *m, int64_t t);
int64_t sw_metric_sum_at(const sw_metric *m, int64_t t, sw_event event);
int64_t sw_metric_max_success(const sw_metric *m);
int64_t sw_metric_max_success_at(const sw_metric *m, int64_t t);
int64_t sw_metric_min_rt(const sw_metric *m);
int64_t sw_metric_min_rt_at(const sw_metric *m, int64_t t);
int64_t sw_metric_window_pass_at(const sw_metric *m, int64_t t);
int64_t sw_metric_previous_window_pass(const sw_metric *m);
int64_t sw_metric_previous_window_pass_at(const sw_metric *m, int64_t t);
int64_t sw_metric_previous_window_block(const sw_metric *m);
int64_t sw_metric_previous_window_block_at(const sw_metric *m, int64_t t);
int64_t sw_metric_waiting(const sw_metric *m);
int64_t sw_metric_waiting_at(const sw_metric *m, int64_t t);
int sw_metric_add_pass(sw_metric *m, int64_t n);
int sw_metric_add_pass_at(sw_metric *m, int64_t t, int64_t n);
int sw_metric_add_block(sw_metric *m, int64_t n);
int sw_metric_add_block_at(sw_metric *m, int64_t t, int64_t n);
int sw_metric_add_exception(sw_metric *m, int64_t n);
int sw_metric_add_exception_at(sw_metric *m, int64_t t, int64_t n);
int sw_metric_add_success(sw_metric *m, int64_t n);
int sw_metric_add_success_at(sw_metric *m, int64_t t, int64_t n);
int sw_metric_add_occupied_pass(sw_metric *m, int64_t n);
int sw_metric_add_occupied_pass_at(sw_metric *m, int64_t t, int64_t n);
int sw_metric_add_rt(sw_metric *m, int64_t rt_ms);
int sw_metric_add_rt_at(sw_metric *m, int64_t t, int64_t rt_ms);
int sw_metric_try_pass(sw_metric *m, int64_t n, int64_t limit, int64_t *pass_out);
int sw_metric_try_pass_at(sw_metric *m, int64_t t, int64_t n, int64_t limit, int64_t *pass_out);
int sw_metric_add_waiting(sw_metric *m, int64_t future_ms, int64_t n);
int sw_metric_details(const sw_metric *m, sw_metric_record *out, uint32_t cap);
int sw_metric_details_at(const sw_metric *m, int64_t t, sw_metric_record *out, uint32_t cap);
int32_t sw_metric_sample_count(const sw_metric *m);
double sw_metric_interval_sec(const sw_metric *m);

/* sliding view */
typedef struct sw_sliding_view sw_sliding_view;
int sw_sliding_view_create(sw_sliding_view **out, const sw_metric *real, int32_t sample_count,
                           int64_t interval_ms);
void sw_sliding_view_free(sw_sliding_view *v);
int64_t sw_sliding_view_sum_at(const sw_sliding_view *v, int64_t t, sw_event event);
double sw_sliding_view_qps_at(const sw_sliding_view *v, int64_t t, sw_event event);
double sw_sliding_view_previous_qps_at(const sw_sliding_view *v, int64_t t, sw_event event);
int64_t sw_sliding_view_max_of_single_bucket_at(const sw_sliding_view *v, int64_t t,
                                                sw_event event);
int64_t sw_sliding_view_min_rt_at(const sw_sliding_view *v, int64_t t);
double sw_sliding_view_avg_rt_at(const sw_sliding_view *v, int64_t t);

/* node */
typedef struct sw_node sw_node;
sw_metric *sw_node_second_metric(sw_node *node);
sw_metric *sw_node_minute_metric(sw_node *node);
double sw_node_pass_qps_at(const sw_node *node, int64_t t);
double sw_node_block_qps_at(const sw_node *node, int64_t t);
double sw_node_success_qps_at(const sw_node *node, int64_t t);
double sw_node_exception_qps_at(const sw_node *node, int64_t t);
double sw_node_occupied_pass_qps_at(const sw_node *node, int64_t t);
double sw_node_would_block_qps_at(const sw_node *node, int64_t t);
double sw_node_total_qps_at(const sw_node *node, int64_t t);
double sw_node_avg_rt_at(const sw_node *node, int64_t t);
double sw_node_min_rt_at(const sw_node *node, int64_t t);
double sw_node_max_success_qps_at(const sw_node *node, int64_t t);
int64_t sw_node_previous_pass_qps_at(const sw_node *node, int64_t t);
int64_t sw_node_previous_block_qps_at(const sw_node *node, int64_t t);
int64_t sw_node_total_request_at(const sw_node *node, int64_t t);
int64_t sw_node_total_pass_at(const sw_node *node, int64_t t);
int64_t sw_node_total_success_at(const sw_node *node, int64_t t);
int64_t sw_node_total_exception_at(const sw_node *node, int64_t t);
int64_t sw_node_block_request_at(const sw_node *node, int64_t t);
int64_t sw_node_concurrency(const sw_node *node);
int64_t sw_node_waiting_at(const sw_node *node, int64_t t);

/* limiter */
typedef struct sw_limiter sw_limiter;
#define SW_VERDICT_PASS ...
#define SW_VERDICT_BLOCK ...
#define SW_VERDICT_WAIT ...
#define SW_ENTRY_PRIORITIZED ...
#define SW_EXIT_ERROR ...
typedef struct sw_decision {
  int32_t verdict;
  int32_t borrowed;
  int64_t wait_ms;
  int64_t retry_after_ms;
  int64_t remaining;
  int32_t would_block;
  int32_t full;
  int64_t probe;
  ...;
} sw_decision;
int sw_limiter_create(sw_limiter **out, const sw_options *opts);
void sw_limiter_free(sw_limiter *l);
sw_node *sw_limiter_node(sw_limiter *l);
int sw_limiter_entry(sw_limiter *l, int64_t n, uint32_t flags, sw_decision *d);
int sw_limiter_entry_at(sw_limiter *l, int64_t t, int64_t n, uint32_t flags, sw_decision *d);
int sw_limiter_exit(sw_limiter *l, int64_t rt_ms, int64_t n, uint32_t flags);
int sw_limiter_exit_at(sw_limiter *l, int64_t t, int64_t rt_ms, int64_t n, uint32_t flags);
int sw_limiter_set_rule(sw_limiter *l, const sw_options *rule);
int sw_limiter_get_rule(const sw_limiter *l, sw_options *opts);
int sw_limiter_set_dry_run(sw_limiter *l, int on);
int sw_limiter_cancel(sw_limiter *l, sw_decision *d);

/* registry */
typedef struct sw_registry sw_registry;
#define SW_NAME_MAX ...
int sw_registry_create(sw_registry **out, uint32_t capacity, const sw_options *opts);
void sw_registry_free(sw_registry *r);
int sw_registry_get(sw_registry *r, const char *name, sw_limiter **out);
int sw_registry_get_ex(sw_registry *r, const char *name, const sw_options *opts,
                       sw_limiter **out);
int sw_registry_find(sw_registry *r, const char *name, sw_limiter **out);
uint32_t sw_registry_capacity(const sw_registry *r);
uint32_t sw_registry_count(const sw_registry *r);
int sw_registry_at(sw_registry *r, uint32_t i, sw_limiter **out, const char **name);

/* segment */
typedef struct sw_segment sw_segment;
#define SW_SEGMENT_CREATE ...
#define SW_SEGMENT_RESET ...
#define SW_SEGMENT_READONLY ...
int sw_segment_open(sw_segment **out, const char *name, uint32_t capacity,
                    const sw_options *opts, uint32_t flags);
void sw_segment_close(sw_segment *seg);
int sw_segment_unlink(const char *name);
sw_registry *sw_segment_registry(sw_segment *seg);
const char *sw_segment_name(const sw_segment *seg);
int64_t sw_segment_size(const sw_segment *seg);
int sw_segment_created(const sw_segment *seg);
#define SW_SEGMENT_KIND_REGISTRY ...
typedef struct sw_segment_info { uint32_t kind; uint32_t ready; uint32_t capacity; ...; } sw_segment_info;
int sw_segment_probe(const char *name, sw_segment_info *out);

/* keyed table */
typedef struct sw_keyed sw_keyed;
#define SW_KEYED_BY_PASS ...
#define SW_KEYED_BY_BLOCK ...
#define SW_KEYED_KEY_MAX ...
int sw_keyed_create(sw_keyed **out, uint32_t capacity, const sw_options *opts);
int sw_keyed_open(sw_keyed **out, const char *name, uint32_t capacity, const sw_options *opts,
                  uint32_t flags);
void sw_keyed_free(sw_keyed *k);
int sw_keyed_created(const sw_keyed *k);
int sw_keyed_entry_at(sw_keyed *k, int64_t t, const void *key, size_t len, int64_t n,
                      uint32_t flags, sw_decision *d);
int sw_keyed_exit_at(sw_keyed *k, int64_t t, const void *key, size_t len, int64_t rt_ms,
                     int64_t n, uint32_t flags);
int sw_keyed_set_rule(sw_keyed *k, const sw_options *rule);
int sw_keyed_get_rule(const sw_keyed *k, sw_options *opts);

typedef struct sw_rules sw_rules;
int sw_rules_parse(sw_rules **out, const char *json, size_t len);
void sw_rules_free(sw_rules *r);
uint32_t sw_rules_count(const sw_rules *r);
int sw_rules_at(const sw_rules *r, uint32_t i, const char **resource, sw_options *opts,
                int64_t *keyed, int64_t *capacity);
int sw_keyed_set_dry_run(sw_keyed *k, int on);
int sw_keyed_cancel(sw_keyed *k, sw_decision *d);
typedef struct sw_keyed_info {
  uint32_t capacity;
  uint32_t slots;
  uint32_t key_bytes;
  uint32_t windows;
  int64_t interval_ms;
  int64_t bytes;
  int64_t bytes_per_key;
  int64_t keys;
  int64_t inserted;
  int64_t reclaimed;
  int64_t evicted;
  int64_t refused;
  int64_t pass, block, would_block;
  int64_t success, exception, rt;
  ...;
} sw_keyed_info;
int sw_keyed_stats(const sw_keyed *k, sw_keyed_info *out);
typedef struct sw_keyed_key {
  uint8_t key[...];
  uint32_t len;
  int64_t pass;
  int64_t block;
  int64_t in_flight;
  int64_t last_ms;
  ...;
} sw_keyed_key;
int sw_keyed_lookup_at(const sw_keyed *k, int64_t t, const void *key, size_t len,
                       sw_keyed_key *out);
int sw_keyed_scan_at(const sw_keyed *k, int64_t t, uint64_t *cursor, sw_keyed_key *out,
                     uint32_t cap);
int sw_keyed_top_at(const sw_keyed *k, int64_t t, uint32_t by, sw_keyed_key *out, uint32_t n,
                    int64_t *active);

/* circuit breakers (libsw/_breaker.py) */
typedef struct sw_breaker sw_breaker;
#define SW_BREAKER_SLOW_RATIO ...
#define SW_BREAKER_ERROR_RATIO ...
#define SW_BREAKER_ERROR_COUNT ...
#define SW_BREAKER_CLOSED ...
#define SW_BREAKER_OPEN ...
#define SW_BREAKER_HALF_OPEN ...
#define SW_EXIT_CANCEL ...
typedef void (*sw_breaker_listener_fn)(void *user, int32_t from, int32_t to, int64_t t,
                                       double value);
typedef struct sw_breaker_info {
  int32_t state;
  int32_t strategy;
  int64_t state_since_ms;
  int64_t next_probe_ms;
  int64_t total;
  int64_t bad;
  double ratio;
  int64_t probes_in_flight;
  int64_t opened;
  int64_t half_opened;
  int64_t closed;
  int64_t reopened;
  int64_t probes;
  int64_t probes_lost;
  int64_t blocked;
  ...;
} sw_breaker_info;
int sw_breaker_create(sw_breaker **out, const sw_options *opts);
int sw_breaker_open(sw_breaker **out, const char *name, const sw_options *opts, uint32_t flags);
void sw_breaker_free(sw_breaker *b);
int sw_breaker_entry(sw_breaker *b, sw_decision *d);
int sw_breaker_entry_at(sw_breaker *b, int64_t t, sw_decision *d);
int sw_breaker_exit(sw_breaker *b, const sw_decision *d, int64_t rt_ms, uint32_t flags);
int sw_breaker_exit_at(sw_breaker *b, int64_t t, const sw_decision *d, int64_t rt_ms,
                       uint32_t flags);
int sw_breaker_set_listener(sw_breaker *b, sw_breaker_listener_fn fn, void *user);
int sw_breaker_stats_at(const sw_breaker *b, int64_t t, sw_breaker_info *out);
extern "Python" void swpy_breaker_changed(void *user, int32_t from, int32_t to, int64_t t,
                                          double value);

/* cluster rules (Redis) */
#define SW_CLUSTER_FALLBACK_LOCAL ...
#define SW_CLUSTER_FAIL_OPEN ...
#define SW_CLUSTER_FAIL_CLOSED ...
typedef struct sw_lease_info {
  int64_t calls;
  int64_t granted;
  int64_t tokens;
  int64_t offset_ms;
  int64_t down_since_ms;
  int32_t up;
  int32_t need;
  ...;
} sw_lease_info;
int sw_lease_stats(const sw_limiter *l, int64_t t, sw_lease_info *info);
typedef struct sw_cluster sw_cluster;
int sw_cluster_create(sw_cluster **out, const char *servers, const sw_options *opts);
void sw_cluster_free(sw_cluster *c);
int sw_cluster_add(sw_cluster *c, sw_limiter *l, const char *resource);
int sw_cluster_remove(sw_cluster *c, sw_limiter *l);
int sw_cluster_refill(sw_cluster *c);
int sw_cluster_start(sw_cluster *c);
int64_t sw_cluster_round_trips(const sw_cluster *c);
int sw_cluster_set_auth(sw_cluster *c, const char *user, const char *password);
int sw_cluster_set_database(sw_cluster *c, int64_t db);
typedef void (*sw_cluster_log_fn)(void *user, int up, const char *server, const char *message);
int sw_cluster_set_log(sw_cluster *c, sw_cluster_log_fn fn, void *user);
/* Redis down / back up, to logging.getLogger("libsw") (libsw/_cluster.py) */
extern "Python" void swpy_cluster_log(void *user, int up, const char *server, const char *message);

/* binding glue: swpy.h, appended by glue_cdef() */
"""

def glue_cdef(path: str) -> str:
    """The declarations of swpy.h for the cdef: its functions as they are,
    its SWPY_* constants as `...` (the compiler gives their values), its
    comments and other preprocessor lines left out."""
    with open(path, encoding="utf-8") as f:
        text = re.sub(r"/\*.*?\*/", "", f.read(), flags=re.S)
    out = []
    for line in text.splitlines():
        m = re.match(r"#define (SWPY_\w+) ", line)
        if m:
            out.append("#define %s ..." % m.group(1))
        elif not line.startswith("#"):
            out.append(line)
    return "\n".join(out) + "\n"


# The binding's glue (swpy.h, swpy.c next to this file): the hot paths' calls
# with one integer argument each, clock reads and response times in C; and
# RateLimiter's special methods of `with` and `async with` (swpy_py.c).
PREAMBLE = '#include "swpy.h"\n'

# Until swpy.c needed the thread state, the module was built for the limited
# API (_libsw.abi3.so): a copy left in build/ would go into the wheel too.
for _old in glob.glob(os.path.join(HERE, "build", "lib*", "libsw", "_libsw.abi3.so")):
    os.remove(_old)

SRC_DIR = libsw_source_dir()
VERSION = libsw_version(SRC_DIR)
GENERATED = generate_version_header(os.path.join(HERE, "build", "generated"), VERSION)

ffibuilder = FFI()
ffibuilder.cdef(CDEF + glue_cdef(os.path.join(HERE, "swpy.h")))
ffibuilder.set_source(
    "libsw._libsw",
    PREAMBLE,
    sources=[os.path.join(HERE, f) for f in ("swpy.c", "swpy_py.c", "swpy_web.c", "swpy_wsgi.c", "swpy_asgi.c", "swpy_flask.c")]
    + libsw_sources(SRC_DIR),
    include_dirs=[GENERATED, SRC_DIR, HERE] + [d for f in OPTIONAL for d in f[0]],
    # swpy.c reads a field of the thread state (the current context), which
    # the limited API hides: the module is built for one CPython version.
    py_limited_api=False,
    define_macros=[("SW_BUILDING", None), ("_GNU_SOURCE", None), ("HAVE_CONFIG_H", None),
                   ("_CFFI_NO_LIMITED_API", None)],
    # -mcx16: the keyed table's 16-byte CAS inline (cmpxchg16b), as configure.ac does
    extra_compile_args=["-std=c11", "-fvisibility=hidden", "-fno-semantic-interposition", "-O2"]
    + (["-mcx16"] if platform.machine() in ("x86_64", "AMD64") else []),
    libraries=["m", "pthread", "dl", "rt"] + [lib for f in OPTIONAL for lib in f[1]],
)

if __name__ == "__main__":
    ffibuilder.compile(tmpdir=os.path.join(HERE, "build", "inplace"), verbose=True)
