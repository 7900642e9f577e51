#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# The ways docs/shared-memory.md ("Giving it") gives a container its
# /dev/shm, which no machine here can run: the Kubernetes manifest parses
# (python3-yaml) and mounts a memory-backed emptyDir with a sizeLimit at
# /dev/shm in every container; the docker command passes --shm-size.
# Environment: SW_SRCDIR (the source tree). Part of make check.
set -eu
page="${SW_SRCDIR:?}/docs/shared-memory.md"
python3 - "$page" <<'PY'
import re, sys
try:
    import yaml
except ImportError:
    sys.exit("python3-yaml is missing (Debian's python3-yaml)")
text = open(sys.argv[1]).read()
blocks = re.findall(r"<!-- doctest: skip a Kubernetes manifest[^>]*-->\n```yaml\n(.*?)```", text, re.S)
assert len(blocks) == 1, "want one Kubernetes manifest, found %d" % len(blocks)
pod = yaml.safe_load(blocks[0])
assert pod["apiVersion"] == "v1" and pod["kind"] == "Pod", pod
spec = pod["spec"]
memory = {v["name"]: v["emptyDir"] for v in spec["volumes"]
          if (v.get("emptyDir") or {}).get("medium") == "Memory"}
assert memory, "no emptyDir with medium: Memory"
units = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30}
for name, ed in memory.items():
    m = re.fullmatch(r"(\d+)(Ki|Mi|Gi)", str(ed.get("sizeLimit", "")))
    assert m and int(m.group(1)) * units[m.group(2)] >= 64 * 2**20, ("sizeLimit", ed)
for c in spec["containers"]:
    mounts = {m["mountPath"]: m["name"] for m in c.get("volumeMounts", [])}
    assert mounts.get("/dev/shm") in memory, ("container %s: /dev/shm" % c["name"], mounts)
docker = re.findall(r"<!-- doctest: skip no Docker engine[^>]*-->\n```sh\n(.*?)```", text, re.S)
assert len(docker) == 1 and re.search(r"^docker run .*--shm-size=\d+[mg]\b", docker[0], re.M), docker
print("docs/shared-memory.md: the Kubernetes manifest and the docker command are sound")
PY
