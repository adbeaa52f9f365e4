#!/usr/bin/env bash
# The docker backend on cgroup v2, inside a vm backend guest: how long Debian's dockerd takes to
# start there, then E1 and E4 (both runtime settings) on the docker backend, with every level's
# readback counted. Prints figures; asserts nothing. Not yet part of the pipeline (a follow-up).
#
#   bash benchmarks/vm_docker.sh [OUT]      (root; needs docker.io and the vm backend's tools)
#
# In the guest /var/lib/docker is a tmpfs: containerd's bolt database cannot mmap a file on
# virtme-ng's 9p mounts ("invalid argument"), so a writable host folder does not do there.
set -euo pipefail
cd "$(dirname "$0")/.."
if [[ "${1:-}" == "--guest" ]]; then
  out=$2
  mount -t tmpfs -o size=1G tmpfs /var/lib/docker
  t0=$(date +%s.%N)
  dockerd --data-root /var/lib/docker --exec-root /tmp/docker-exec --pidfile /tmp/docker.pid \
    -H unix:///tmp/guest-docker.sock --storage-driver vfs --iptables=false --ip-masq=false --bridge=none \
    --exec-opt native.cgroupdriver=cgroupfs > "$out/dockerd.log" 2>&1 &
  export DOCKER_HOST=unix:///tmp/guest-docker.sock
  for _ in $(seq 240); do docker info > /dev/null 2>&1 && break; sleep 0.5; done
  t1=$(date +%s.%N)
  echo "dockerd ready after $(echo "$t1 - $t0" | bc) s"
  docker info 2> /dev/null | grep -E "Cgroup Version|Cgroup Driver|runc version|Storage Driver"
  for b in go124mod go125mod; do
    .venv/bin/python -m throttlelab build-image --variant $b --binary results/build/$b/cpulab --out "$out/$b.json"
  done
  t2=$(date +%s.%N)
  echo "images built after $(echo "$t2 - $t1" | bc) s"
  bins="--binary go124mod=results/build/go124mod/cpulab --binary go125mod=results/build/go125mod/cpulab"
  # shellcheck disable=SC2086
  .venv/bin/python -m throttlelab run --backend docker --experiment E1 --variant all-limits --repeat 0 \
    --spec '{"app":{"limit":"2","request":"500m"},"sidecar":{"limit":"500m","request":"100m"}}' $bins \
    --out "$out/raw/E1/all-limits/rep0.jsonl"
  for rt in runc-new runc-old; do
    # shellcheck disable=SC2086
    .venv/bin/python -m throttlelab run --backend docker --experiment E4 --variant $rt --repeat 0 --runtime $rt \
      --spec "{\"runtime\":\"$rt\"}" $bins --out "$out/raw/E4/$rt/rep0.jsonl"
  done
  t3=$(date +%s.%N)
  echo "E1 and E4 (2 variants) after $(echo "$t3 - $t2" | bc) s"
  kill "$(cat /tmp/docker.pid)" || true
  exit 0
fi
out=$(realpath -m "${1:-results/vm-docker}")
mkdir -p "$out"
[[ -x results/build/go124mod/cpulab && -x results/build/go125mod/cpulab ]] \
  || .venv/bin/snakemake --cores 1 results/build/go124mod/cpulab results/build/go125mod/cpulab
start=$(date +%s)
.venv/bin/python -m throttlelab.platform.vm_guest run --vcpus 2 --memory 2G --rwdir "$out" -- \
  bash benchmarks/vm_docker.sh --guest "$out"
echo "guest: $(($(date +%s) - start)) s in all"
.venv/bin/python - "$out" << 'EOF'
import json, sys
from pathlib import Path
for path in sorted(Path(sys.argv[1]).glob("raw/*/*/rep0.jsonl")):
    records = [json.loads(line) for line in path.read_text().splitlines()]
    env = records[0]["environment"]
    levels = [r for r in records if r["type"] == "readback"]
    bad = [r for r in levels if r["mismatches"]]
    print(f"{path.parent.parent.name}/{path.parent.name}: cgroup v{env.get('cgroup_version')}, runc "
          f"{(env.get('versions') or {}).get('runc')}, {len(levels)} levels read back, {len(bad)} off the design")
EOF
