#!/usr/bin/env python3
"""Print the replace directives a consumer of k8s.io/kubernetes needs.

k8s.io/kubernetes's own go.mod requires its staging modules (k8s.io/api,
k8s.io/client-go, ...) at the placeholder version v0.0.0 and replaces each one
with a folder inside its own tree:

    k8s.io/api => ./staging/src/k8s.io/api

A module that depends on k8s.io/kubernetes does not see those folder replaces
(replace directives apply only in the main module), so it must replace each
staging module with the published module of the matching version instead:
k8s.io/kubernetes v1.X.Y goes with the staging modules at v0.X.Y.

This script reads the downloaded k8s.io/kubernetes go.mod and prints one such
replace per staging replace it finds there, so the list is never typed by hand.

    gen_replaces.py --version v1.34.12     # finds go.mod with `go mod download -json`
    gen_replaces.py --gomod PATH/TO/v1.34.12.mod [--staging-version v0.34.12]
    gen_replaces.py --version v1.34.12 --check cluster/go.mod

With --check it prints nothing on success and exits 1, naming the differences,
when the replace directives for k8s.io/* modules in that go.mod are not exactly
the generated ones. Standard library only (Python 3.11).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
from pathlib import Path

KUBERNETES = "k8s.io/kubernetes"

# A staging replace in k8s.io/kubernetes's go.mod: `k8s.io/NAME => ./staging/src/k8s.io/NAME`.
# An optional version on the left (`k8s.io/api v0.0.0 => ...`) is allowed.
_STAGING = re.compile(
    r"^(?P<path>k8s\.io/[A-Za-z0-9._/-]+)(?:\s+v\S+)?\s*=>\s*\./staging/src/(?P<dir>k8s\.io/[A-Za-z0-9._/-]+)$"
)
# A published-module replace in a consumer go.mod: `k8s.io/NAME => k8s.io/NAME vX.Y.Z`.
_PUBLISHED = re.compile(r"^(?P<path>k8s\.io/[A-Za-z0-9._/-]+)(?:\s+v\S+)?\s*=>\s*(?P<target>\S+)\s+(?P<version>v\S+)$")
_RELEASE = re.compile(r"^v1\.(?P<minor>\d+)\.(?P<patch>\d+)(?P<rest>(?:-[0-9A-Za-z.-]+)?)$")


def replace_lines(gomod_text: str) -> list[str]:
    """The bodies ("LEFT => RIGHT") of all replace directives in a go.mod, in order."""
    bodies: list[str] = []
    in_block = False
    for raw in gomod_text.splitlines():
        line = raw.split("//", 1)[0].strip()
        if not line:
            continue
        if in_block:
            if line == ")":
                in_block = False
            else:
                bodies.append(line)
            continue
        if re.fullmatch(r"replace\s*\(", line):
            in_block = True
        elif line.startswith("replace ") or line.startswith("replace\t"):
            bodies.append(line[len("replace") :].strip())
    if in_block:
        raise ValueError("go.mod ends inside a replace ( ... ) block")
    return bodies


def staging_modules(gomod_text: str) -> list[str]:
    """Module paths that k8s.io/kubernetes's go.mod replaces with ./staging/src folders."""
    mods: list[str] = []
    for body in replace_lines(gomod_text):
        m = _STAGING.match(body)
        if not m:
            continue
        if m["path"] != m["dir"]:
            raise ValueError(f"staging replace whose folder is not its module path: {body!r}")
        mods.append(m["path"])
    if not mods:
        raise ValueError("no `k8s.io/... => ./staging/src/k8s.io/...` replace found in this go.mod")
    if len(set(mods)) != len(mods):
        raise ValueError("a staging module is replaced twice")
    return mods


def module_path(gomod_text: str) -> str | None:
    for raw in gomod_text.splitlines():
        line = raw.split("//", 1)[0].strip()
        if line.startswith("module"):
            return line.split(None, 1)[1].strip().strip('"')
    return None


def staging_version(kubernetes_version: str) -> str:
    """v1.34.12 -> v0.34.12 (the staging modules are tagged v0.MINOR.PATCH)."""
    m = _RELEASE.match(kubernetes_version)
    if not m:
        raise ValueError(f"not a k8s.io/kubernetes v1.X.Y version: {kubernetes_version!r}")
    return f"v0.{m['minor']}.{m['patch']}{m['rest']}"


def version_from_path(path: Path) -> str | None:
    """The version in a module-cache path: .../@v/v1.34.12.mod or .../kubernetes@v1.34.12/go.mod."""
    if path.suffix == ".mod" and path.parent.name == "@v":
        return path.stem
    m = re.search(r"@(v[^/]+)$", str(path.parent))
    return m.group(1) if m else None


def download_gomod(version: str) -> Path:
    """Path of k8s.io/kubernetes@version's go.mod in the module cache (downloads it if needed)."""
    cmd = ["go", "mod", "download", "-json", f"{KUBERNETES}@{version}"]
    if os.name == "posix":
        cmd = ["nice", "-n", "19", *cmd]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    try:
        info = json.loads(proc.stdout)
    except json.JSONDecodeError:
        raise SystemExit(f"`{' '.join(cmd)}` failed (exit {proc.returncode}): {proc.stderr.strip()}") from None
    if info.get("Error"):
        raise SystemExit(f"{KUBERNETES}@{version}: {info['Error']}")
    if proc.returncode != 0 or not info.get("GoMod"):
        raise SystemExit(f"`{' '.join(cmd)}` failed (exit {proc.returncode}): {proc.stderr.strip()}")
    return Path(info["GoMod"])


def render(mods: list[str], version: str, kubernetes_version: str) -> str:
    width = max(len(m) for m in mods)
    out = [
        f"// Generated by cluster/gen_replaces.py from {KUBERNETES} {kubernetes_version}'s go.mod:",
        f"// its {len(mods)} staging modules, each replaced with the published module at {version}.",
        "replace (",
    ]
    out += [f"\t{m:<{width}} => {m} {version}" for m in mods]
    out.append(")")
    return "\n".join(out) + "\n"


def check(consumer: Path, mods: list[str], version: str) -> list[str]:
    """Differences between the generated replaces and the k8s.io/* replaces in a consumer go.mod."""
    want = {m: (m, version) for m in mods}
    have: dict[str, tuple[str, str]] = {}
    problems: list[str] = []
    for body in replace_lines(consumer.read_text()):
        m = _PUBLISHED.match(body)
        if m:
            have[m["path"]] = (m["target"], m["version"])
        elif body.startswith("k8s.io/"):
            problems.append(f"unexpected k8s.io replace: {body}")
    for path, target in want.items():
        if path not in have:
            problems.append(f"missing: {path} => {target[0]} {target[1]}")
        elif have[path] != target:
            problems.append(f"wrong: {path} => {have[path][0]} {have[path][1]} (want {target[1]})")
    for path in have.keys() - want.keys():
        problems.append(f"extra: {path} => {have[path][0]} {have[path][1]}")
    return problems


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    src = ap.add_mutually_exclusive_group(required=True)
    src.add_argument(
        "--version", help="k8s.io/kubernetes version, e.g. v1.34.12 (go.mod found via go mod download -json)"
    )
    src.add_argument("--gomod", type=Path, help="path of a downloaded k8s.io/kubernetes go.mod")
    ap.add_argument("--staging-version", help="version for the staging modules (default: v0.X.Y from v1.X.Y)")
    ap.add_argument(
        "--check", type=Path, metavar="GOMOD", help="compare with this go.mod's replaces instead of printing"
    )
    args = ap.parse_args(argv)

    gomod = args.gomod if args.gomod else download_gomod(args.version)
    kube_version = args.version or version_from_path(gomod)
    text = gomod.read_text()
    if module_path(text) != KUBERNETES:
        raise SystemExit(f"{gomod}: module is {module_path(text)!r}, not {KUBERNETES}")
    if args.staging_version:
        version = args.staging_version
    elif kube_version:
        version = staging_version(kube_version)
    else:
        raise SystemExit(f"cannot tell the k8s.io/kubernetes version from {gomod}: give --staging-version")
    mods = staging_modules(text)

    if args.check:
        problems = check(args.check, mods, version)
        for p in problems:
            print(f"{args.check}: {p}", file=sys.stderr)
        return 1 if problems else 0
    sys.stdout.write(render(mods, version, kube_version or "?"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
