"""Build the pinned cluster tools (cluster/) into a cache outside the checkout.

Command line (what rules/platform/cluster_tools.smk calls; ``--settings`` is config.yaml's
``cluster_tools`` section as JSON, keys left out keep their defaults)::

    throttlelab cluster-tools build --project runc-1.3.0 --cluster-dir cluster --out results/cluster-tools/runc-1.3.0.json
    throttlelab cluster-tools summary --out results/cluster-tools/tools.json results/cluster-tools/runc-1.3.0.json ...
    throttlelab cluster-tools status --cluster-dir cluster     # what is in the cache; builds nothing

A binary is built when its stamp is missing or its build key differs: the key is the SHA-256 of
everything the binary is made from (the project's go.mod and go.sum, the pinned version, the
package, tags, build mode, linker flags with the version values, the Go toolchain's version and
target, cgo and the C compiler's name). So a second build is a no-op: it only prints what it
found. Each binary is checked after its build: its version command must print the pinned version
(a Kubernetes binary saying v0.0.0 is a failed build), and runc must name its libseccomp.

The go command runs with the project's own caches (``cluster_tools.go_mod_cache``,
``go_build_cache``), GOTOOLCHAIN=local, GOWORK=off and GOFLAGS="-mod=readonly -modcacherw
-buildvcs=false": modules come from the module proxy the user's go is set up for (GOPROXY) and are
checked against go.sum; the pinned go.mod and go.sum are never rewritten; the caches can be
removed with rm -rf; a killed build resumes from Go's build cache.
"""

from __future__ import annotations

import argparse
import ctypes
import fcntl
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from throttlelab.errors import BuildError
from throttlelab.host.atomic_write import write_json_atomically
from throttlelab.host.gobuild import find_go
from throttlelab.platform import tool_catalogue as catalogue
from throttlelab.platform.tool_catalogue import Binary, Project
from throttlelab.model.digest import sha256_file

GOFLAGS = "-mod=readonly -modcacherw -buildvcs=false"
# the toolchain facts that enter every build key (`go env`)
GO_FACTS = ("GOVERSION", "GOOS", "GOARCH", "GOAMD64", "GOEXPERIMENT", "CC")
VERSION_TIMEOUT_S = 60
_PR_SET_PDEATHSIG = 1

Say = Callable[[str], None]


def say(message: str) -> None:
    print(message, flush=True)


@dataclass(frozen=True)
class ToolsSettings:
    """Where the tools and the go command's caches live (config.yaml's ``cluster_tools``)."""

    cache: Path
    go_mod_cache: Path
    go_build_cache: Path

    @classmethod
    def from_mapping(cls, mapping: Mapping[str, Any] | None, env: Mapping[str, str] = os.environ) -> ToolsSettings:
        """Null or missing keys take the defaults under ``cache_home(env)``."""
        mapping = dict(mapping or {})
        unknown = sorted(set(mapping) - {"cache", "go_mod_cache", "go_build_cache"})
        if unknown:
            raise BuildError(
                f"cluster_tools: unknown setting {', '.join(unknown)}; "
                "the settings are cache, go_mod_cache, go_build_cache (config/config.schema.yaml)"
            )
        home = cache_home(env)
        defaults = {
            "cache": home / "cluster-tools",
            "go_mod_cache": home / "go-mod",
            "go_build_cache": home / "go-build",
        }
        paths = {}
        for key, default in defaults.items():
            value = mapping.get(key)
            path = Path(value).expanduser() if value else default
            if not path.is_absolute():
                raise BuildError(
                    f"cluster_tools.{key}: {value!r} is not an absolute path; give one (or null for {default})"
                )
            paths[key] = path
        return cls(**paths)


def cache_home(env: Mapping[str, str] = os.environ) -> Path:
    """$XDG_CACHE_HOME/throttlelab, or ~/.cache/throttlelab."""
    base = env.get("XDG_CACHE_HOME") or str(Path(env.get("HOME") or Path.home()) / ".cache")
    return Path(base) / "throttlelab"


def go_environment(settings: ToolsSettings, cgo: bool, base: Mapping[str, str] = os.environ) -> dict[str, str]:
    """The go command's environment: the user's (GOPROXY, GOSUMDB, PATH, CC), the project's caches,
    the local toolchain only, no workspace, a target of this host, and the fixed GOFLAGS."""
    env = {k: v for k, v in base.items() if k not in ("GOOS", "GOARCH", "GOFLAGS", "GOWORK", "GOPATH")}
    env.update(
        GOMODCACHE=str(settings.go_mod_cache),
        GOCACHE=str(settings.go_build_cache),
        GOFLAGS=GOFLAGS,
        GOTOOLCHAIN="local",
        GOWORK="off",
        CGO_ENABLED="1" if cgo else "0",
    )
    return env


@dataclass(frozen=True)
class ModulePin:
    """A project's folder under cluster/ and what it pins."""

    folder: Path
    version: str
    gomod_sha256: str
    gosum_sha256: str


def module_pin(cluster_dir: Path, project: Project) -> ModulePin:
    """Read the project's go.mod and go.sum under ``cluster_dir``: the version it pins, their hashes."""
    folder = (Path(cluster_dir) / project.folder).resolve()
    gomod, gosum = folder / "go.mod", folder / "go.sum"
    for path in (gomod, gosum):
        if not path.is_file():
            raise BuildError(
                f"{project.name}: {path} is missing; give the repository's cluster/ folder "
                "(--cluster-dir) with every module of cluster/README.md"
            )
    version = catalogue.required_version(gomod.read_text(), project.module, str(gomod))
    return ModulePin(folder, version, sha256_file(gomod), sha256_file(gosum))


def _die_with_parent() -> None:
    """preexec_fn: the go command is killed if this process is (SIGKILL included)."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        pass  # then only the normal exits stop it


def run_go(go: str, args: list[str], folder: Path, env: Mapping[str, str], what: str) -> str:
    """Run ``go ARGS`` in ``folder`` in a process group of its own, killed on any way out of here
    (an exception, a signal turned into one); return its stdout. Failure: a BuildError naming ``what``."""
    proc = subprocess.Popen(
        [go, *args],
        cwd=folder,
        env=dict(env),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        preexec_fn=_die_with_parent,
    )
    try:
        out, err = proc.communicate()
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    if proc.returncode != 0:
        tail = "\n".join(err.strip().splitlines()[-40:])
        raise BuildError(f"{what} failed (go {' '.join(args[:1])} in {folder}, exit {proc.returncode}):\n{tail}")
    return out


def go_facts(go: str, folder: Path, env: Mapping[str, str]) -> dict[str, str]:
    """The toolchain facts of GO_FACTS, from `go env -json`."""
    return json.loads(run_go(go, ["env", "-json", *GO_FACTS], folder, env, "go env"))


def release_time(go: str, folder: Path, module: str, version: str, env: Mapping[str, str]) -> str:
    """The module proxy's release time of module@version (its .info Time), downloading it if needed."""
    out = run_go(
        go,
        ["mod", "download", "-json", f"{module}@{version}"],
        folder,
        env,
        f"downloading {module}@{version} (is the module proxy reachable? `go env GOPROXY`)",
    )
    info = json.loads(out)
    if info.get("Error"):
        raise BuildError(
            f"{module}@{version}: {info['Error']} (the module proxy must serve this version; "
            "cluster/README.md says how each pin was chosen)"
        )
    try:
        return json.loads(Path(info["Info"]).read_text())["Time"]
    except (KeyError, OSError, ValueError) as exc:
        raise BuildError(f"{module}@{version}: no release time in the module cache's .info ({exc})") from None


def key_inputs(
    project: Project, binary: Binary, pin: ModulePin, facts: Mapping[str, str], flags: list[str]
) -> dict[str, Any]:
    """Everything one binary is made from; its hash (platform.tool_catalogue.build_key) is the cache key."""
    return {
        "project": project.name,
        "module": project.module,
        "version": pin.version,
        "go.mod": pin.gomod_sha256,
        "go.sum": pin.gosum_sha256,
        "binary": binary.name,
        "package": binary.package,
        "cgo": binary.cgo,
        "flags": flags,
        "goflags": GOFLAGS,
        "go": dict(facts),
    }


def project_dir(settings: ToolsSettings, project: Project, version: str) -> Path:
    return settings.cache / catalogue.cache_folder(project, version)


def binary_path(folder: Path, binary: Binary) -> Path:
    return folder / "bin" / binary.name


def stamp_path(folder: Path, binary: Binary) -> Path:
    return folder / "stamps" / f"{binary.name}.json"


def read_stamp(path: Path) -> dict[str, Any] | None:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def stamp_problem(stamp: dict[str, Any] | None, binary_file: Path, key: str | None = None) -> str | None:
    """Why the cached binary cannot be used (None: it can): no stamp, another key, a binary missing
    or changed since its stamp was written. ``key`` None checks the binary against its stamp only."""
    if stamp is None:
        return "not built"
    if key is not None and stamp.get("key") != key:
        return "built from other inputs"
    if not binary_file.is_file():
        return f"{binary_file} is missing"
    if sha256_file(binary_file) != stamp.get("sha256"):
        return f"{binary_file} differs from the one built"
    return None


@contextmanager
def cache_folder_lock(folder: Path) -> Iterator[None]:
    """One builder per folder of the tool cache at a time: a second waits, then finds the stamps written
    (the cluster tools' projects, the kind node images' bases and nodes)."""
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / ".lock", "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def remove_partials(folder: Path) -> None:
    """Binaries a killed build left half-written (under the lock nobody else is writing one)."""
    for path in (folder / "bin").glob(".*.partial-*"):
        path.unlink(missing_ok=True)


def version_output(path: Path, binary: Binary) -> str:
    """What the binary's version command prints (stdout and stderr), run in an empty folder as HOME."""
    with tempfile.TemporaryDirectory(prefix="throttlelab-version-") as home:
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": home, "LANG": "C", "KUBECONFIG": "/dev/null"}
        try:
            proc = subprocess.run(
                [str(path), *binary.version_args],
                cwd=home,
                env=env,
                capture_output=True,
                text=True,
                timeout=VERSION_TIMEOUT_S,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise BuildError(f"{path} {' '.join(binary.version_args)}: {exc}") from None
    if proc.returncode != 0:
        raise BuildError(
            f"{path} {' '.join(binary.version_args)} exited {proc.returncode}: "
            f"{(proc.stderr or proc.stdout).strip()[-2000:]}"
        )
    return proc.stdout + proc.stderr


def checked_version(path: Path, binary: Binary, version: str) -> list[str]:
    """The version output's lines, after checking it names the pinned version (BuildError if not)."""
    output = version_output(path, binary)
    problems = catalogue.version_problems(binary, version, output)
    if problems:
        raise BuildError(
            f"{path} was built but its version is wrong ({'; '.join(problems)}); the version ldflags "
            f"did not reach it (platform/tool_catalogue.py). It printed:\n{output.strip()}"
        )
    return [line for line in output.splitlines() if line.strip()]


def check_build_tools(project: Project, env: Mapping[str, str]) -> None:
    """What cgo and the seccomp tag need, before any compiling: a C compiler, libseccomp's pkg-config."""
    if any(b.cgo for b in project.binaries):
        cc = env.get("CC") or "gcc"
        if shutil.which(cc.split()[0], path=env.get("PATH")) is None:
            raise BuildError(
                f"{project.name} needs cgo and the C compiler {cc!r} is missing (Debian: apt-get install gcc libc6-dev)"
            )
    if any("seccomp" in b.tags for b in project.binaries):
        found = (
            shutil.which("pkg-config", path=env.get("PATH"))
            and subprocess.run(["pkg-config", "--exists", "libseccomp"], env=dict(env)).returncode == 0
        )
        if not found:
            raise BuildError(
                f"{project.name} is built with cgo and the seccomp tag, and libseccomp's development "
                "files are missing (Debian: apt-get install libseccomp-dev pkg-config)"
            )


def _now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def build_binary(
    go: str, pin: ModulePin, binary: Binary, flags: list[str], jobs: int, settings: ToolsSettings, folder: Path
) -> float:
    """`go build` one binary into the cache folder (written beside, then renamed): its seconds."""
    out = binary_path(folder, binary)
    out.parent.mkdir(parents=True, exist_ok=True)
    partial = out.parent / f".{binary.name}.partial-{os.getpid()}"
    start = time.monotonic()
    try:
        run_go(
            go,
            ["build", "-p", str(jobs), *flags, "-o", str(partial), binary.package],
            pin.folder,
            go_environment(settings, binary.cgo),
            f"go build of {binary.name}",
        )
        os.replace(partial, out)
    finally:
        partial.unlink(missing_ok=True)
    return time.monotonic() - start


def build_project(
    name: str, cluster_dir: Path, settings: ToolsSettings, jobs: int = 2, tell: Say = say
) -> dict[str, Any]:
    """Build every binary of project ``name`` whose cached copy is not current; the manifest of
    what the cache now holds (paths, hashes, version lines, build times)."""
    project = catalogue.project(name)
    if jobs < 1:
        raise BuildError(f"--jobs {jobs}: give 1 or more")
    start = time.monotonic()
    pin = module_pin(cluster_dir, project)
    go = find_go()
    env = go_environment(settings, cgo=False)
    folder = project_dir(settings, project, pin.version)
    tell(f"cluster tools: {project.name} ({project.module} {pin.version}) in {folder}")
    facts = go_facts(go, pin.folder, env)
    values = catalogue.version_values(
        pin.version,
        catalogue.build_date(release_time(go, pin.folder, project.module, pin.version, env)),
        project.commit,
    )
    entries, downloaded = [], None
    with cache_folder_lock(folder):
        remove_partials(folder)
        for index, binary in enumerate(project.binaries, 1):
            flags = catalogue.go_build_flags(binary, values)
            key = catalogue.build_key(key_inputs(project, binary, pin, facts, flags))
            path, stamp_file = binary_path(folder, binary), stamp_path(folder, binary)
            label = f"  [{index}/{len(project.binaries)}] {binary.name}"
            stamp = read_stamp(stamp_file)
            problem = stamp_problem(stamp, path, key)
            if problem is None:
                tell(
                    f"{label}: up to date (built in {catalogue.duration_text(stamp['build_seconds'])} on "
                    f"{stamp['built_at'][:10]}): {_version_line(binary, stamp).strip()}"
                )
                entries.append(_entry(binary, path, stamp, built_now=False))
                continue
            if downloaded is None:
                check_build_tools(project, os.environ)
                tell(f"  modules of {project.folder}/go.mod: downloading into {settings.go_mod_cache} ...")
                began = time.monotonic()
                run_go(go, ["mod", "download"], pin.folder, env, f"downloading the modules of {project.name}")
                downloaded = time.monotonic() - began
                tell(f"  modules ready in {catalogue.duration_text(downloaded)}")
            tell(f"{label}: building ({problem}; cgo {'on' if binary.cgo else 'off'}, -p {jobs}) ...")
            seconds = build_binary(go, pin, binary, flags, jobs, settings, folder)
            try:
                lines = checked_version(path, binary, pin.version)
            except BuildError:
                path.unlink()  # a binary with the wrong version is never left where the cluster looks
                raise
            stamp = {
                "key": key,
                "inputs": key_inputs(project, binary, pin, facts, flags),
                "sha256": sha256_file(path),
                "version": pin.version,
                "version_output": lines,
                "build_seconds": round(seconds, 1),
                "built_at": _now(),
            }
            write_json_atomically(stamp_file, stamp, indent=2)
            tell(f"{label}: built in {catalogue.duration_text(seconds)}: {_version_line(binary, stamp).strip()}")
            entries.append(_entry(binary, path, stamp, built_now=True, seconds=seconds))
    total = time.monotonic() - start
    built = [e for e in entries if e["built_now"]]
    tell(
        f"{project.name} {pin.version}: {len(built)} built, {len(entries) - len(built)} up to date, "
        f"{catalogue.duration_text(total)}"
    )
    return {
        "project": project.name,
        "module": project.module,
        "version": pin.version,
        "folder": str(folder),
        "bin": str(folder / "bin"),
        "download_seconds": round(downloaded, 1) if downloaded is not None else None,
        "seconds": round(total, 1),
        "binaries": entries,
    }


def _version_line(binary: Binary, stamp: dict[str, Any]) -> str:
    return catalogue.version_line(binary, "\n".join(stamp["version_output"])) or stamp["version_output"][0]


def _entry(binary: Binary, path: Path, stamp: dict[str, Any], built_now: bool, seconds: float = 0.0) -> dict[str, Any]:
    return {
        "name": binary.name,
        "path": str(path),
        "sha256": stamp["sha256"],
        "version_line": _version_line(binary, stamp).strip(),
        "version_output": stamp["version_output"],
        "built_now": built_now,
        "seconds": round(seconds, 1),
        "build_seconds": stamp["build_seconds"],
        "built_at": stamp["built_at"],
    }


def summary(manifests: list[dict[str, Any]], tell: Say = say) -> dict[str, Any]:
    """One manifest of every project; prints each binary's version and build time, and the totals."""
    tell("cluster tools:")
    this_run = cold = 0.0
    for manifest in manifests:
        for entry in manifest["binaries"]:
            how = (
                f"built now in {catalogue.duration_text(entry['seconds'])}"
                if entry["built_now"]
                else f"cached, built in {catalogue.duration_text(entry['build_seconds'])}"
            )
            tell(f"  {entry['name']:<24} {entry['version_line']:<44} {how}")
            cold += entry["build_seconds"]
        this_run += manifest["seconds"]
    tell(
        f"cluster tools: this build {catalogue.duration_text(this_run)}; compiling all of them took "
        f"{catalogue.duration_text(cold)} (the sum of the cached builds' times, downloads not included)"
    )
    return {
        "projects": {m["project"]: m for m in manifests},
        "seconds": round(this_run, 1),
        "build_seconds": round(cold, 1),
    }


def cached(cluster_dir: Path, settings: ToolsSettings) -> list[dict[str, Any]]:
    """Each binary of every project, as the cache holds it for the pins in ``cluster_dir``: its path
    and the problem that stops its use (None: built for this pin's version and go.sum, unchanged since).
    Runs no go command and reaches no network; the build key itself is the build's to check."""
    rows = []
    for project in catalogue.PROJECTS:
        pin = module_pin(cluster_dir, project)
        folder = project_dir(settings, project, pin.version)
        for binary in project.binaries:
            path = binary_path(folder, binary)
            stamp = read_stamp(stamp_path(folder, binary))
            problem = stamp_problem(stamp, path)
            if problem is None and stamp["inputs"]["go.sum"] != pin.gosum_sha256:
                problem = "built from another go.sum"
            rows.append(
                {"project": project.name, "binary": binary, "version": pin.version, "path": path, "problem": problem}
            )
    return rows


class Stopped(BuildError):
    """A termination signal arrived; unwinding kills the go command on the way out."""


def _on_signal(signum: int, _frame: Any) -> None:
    raise Stopped(f"stopped by {signal.Signals(signum).name}; the next build resumes from Go's build cache")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="throttlelab cluster-tools", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    build = sub.add_parser("build", help="build one project's binaries into the cache (a no-op when current)")
    build.add_argument("--project", required=True, choices=catalogue.PROJECT_NAMES)
    build.add_argument("--out", type=Path, required=True, help="the project's manifest (JSON)")
    build.add_argument("--jobs", type=int, default=2, help="go build -p (default 2)")
    status = sub.add_parser("status", help="what the cache holds for the pins; builds nothing")
    for command in (build, status):
        command.add_argument(
            "--cluster-dir",
            type=Path,
            default=Path("cluster"),
            help="the repository's cluster/ folder (default ./cluster)",
        )
        command.add_argument("--settings", default="{}", help="config.yaml's cluster_tools section, as JSON")
    summarise = sub.add_parser("summary", help="merge the projects' manifests and print the build times")
    summarise.add_argument("--out", type=Path, required=True)
    summarise.add_argument("manifests", nargs="+", type=Path)
    args = parser.parse_args(argv)
    if args.command == "summary":
        manifests = [json.loads(path.read_text()) for path in args.manifests]
        write_json_atomically(args.out, summary(manifests), indent=2)
        return 0
    try:
        settings = ToolsSettings.from_mapping(json.loads(args.settings))
    except ValueError as exc:
        raise BuildError(f"--settings is not JSON: {exc}") from None
    if args.command == "status":
        for row in cached(args.cluster_dir, settings):
            print(f"{row['project']:<12} {row['binary'].name:<24} {row['path']}: {row['problem'] or 'built'}")
        return 0
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, _on_signal)
    write_json_atomically(args.out, build_project(args.project, args.cluster_dir, settings, args.jobs), indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
