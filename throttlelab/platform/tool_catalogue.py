"""The pinned cluster tools (cluster/): what each upstream project builds, how upstream
sets its version at link time, and how each binary's version command answers.

One row per Go module under cluster/ (``PROJECTS``, in build order: the small ones first); adding
a tool touches this table only. Everything here is pure: the version pinned by a go.mod, the cache
folder of a project's version, the key of one binary's build, the ``-ldflags`` of a binary, and
the parsing of a version command's output. The build itself (go, stamps, timing) is
``throttlelab.platform.tool_build``.

Cache layout (the root is the ``cluster_tools.cache`` setting)::

    <root>/<family>-<version>/bin/<binary>          the binary
    <root>/<family>-<version>/stamps/<binary>.json  its build key, sha256, version output, build time
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timezone

from throttlelab.errors import BuildError

# Kubernetes sets each version key in both packages, client-go first (hack/lib/version.sh).
KUBE_VERSION_PACKAGES = ("k8s.io/client-go/pkg/version", "k8s.io/component-base/version")
# upstream's order of the keys; gitCommit only when the commit is known. gitTreeState is "archive":
# the source is a module zip, an export with no git tree (version.sh's word for git-archive exports).
KUBE_VERSION_KEYS = (
    ("buildDate", "{date}"),
    ("gitCommit", "{commit}"),
    ("gitTreeState", "archive"),
    ("gitVersion", "{version}"),
    ("gitMajor", "{major}"),
    ("gitMinor", "{minor}"),
)
CONTAINERD_VERSION = "github.com/containerd/containerd/v2/version"


@dataclass(frozen=True)
class Binary:
    """One binary of a project: its main package and how it is built and asked its version."""

    name: str  # its file name in the cache's bin/
    package: str  # import path of its main package (a `tool` line of the project's go.mod)
    version_args: tuple[str, ...]  # what makes it print its version and exit 0
    version_pattern: str  # a regex with one group, the version as printed, matched per line
    cgo: bool = False
    tags: tuple[str, ...] = ()
    buildmode: str | None = None  # "pie" where upstream's Makefile builds a PIE
    extra_ldflags: tuple[str, ...] = ()  # after the -X flags: "-s", "-w", "-extldflags", "-static"
    # -X symbol -> value template ({version}, {bare}, {major}, {minor}, {date}, {commit}, {short_commit});
    # a symbol whose template needs the commit is left out when the project's commit is unknown
    symbols: tuple[tuple[str, str], ...] = ()
    must_print: tuple[str, ...] = ()  # regexes some line of the version output must match (runc: libseccomp)
    prints_v: bool = True  # prints "v1.34.12" (True) or "1.34.12" (False)


@dataclass(frozen=True)
class Project:
    """One Go module under cluster/: the upstream module whose version it pins, and its binaries."""

    name: str  # the Snakemake wildcard and the manifest's name
    folder: str  # the module's folder under cluster/
    module: str  # the upstream module whose required version is the project's version
    family: str  # the cache folder's name before the version
    binaries: tuple[Binary, ...]
    # the commit of the upstream release tag, where the module proxy said it (an .info Origin); None if not known
    commit: str | None = None
    # "node": the real node's tools (target cluster_tools); "kind": what the kind node images and the
    # kind backend add (kind itself, kubeadm, kube-proxy, CoreDNS; target kind_tools)
    group: str = "node"


def _kube_symbols() -> tuple[tuple[str, str], ...]:
    return tuple((f"{pkg}.{key}", value) for key, value in KUBE_VERSION_KEYS for pkg in KUBE_VERSION_PACKAGES)


# hack/lib/golang.sh (release build, DBG unset): -trimpath, -ldflags "all=<version> -s -w",
# -tags selinux,notest,grpcnotrace; KUBE_STATIC_BINARIES (apiserver, controller-manager, scheduler,
# kubectl) with CGO_ENABLED=0, kubelet with cgo as the environment has it (on: gcc is needed anyway).
_KUBE = dict(
    tags=("selinux", "notest", "grpcnotrace"),
    extra_ldflags=("-s", "-w"),
    symbols=_kube_symbols(),
    version_pattern=r"^Kubernetes (v\S+)$",
    version_args=("--version",),
)


def _kube(name: str, cgo: bool = False, **overrides) -> Binary:
    return Binary(**{**_KUBE, "name": name, "package": f"k8s.io/kubernetes/cmd/{name}", "cgo": cgo, **overrides})


# runc's Makefile (`make runc`): -trimpath -buildmode=pie -tags "seccomp urfave_cli_no_docs", cgo with
# libseccomp; the version is its embedded VERSION file, -X main.gitCommit only from a git checkout.
def _runc() -> Binary:
    return Binary(
        "runc",
        "github.com/opencontainers/runc",
        ("--version",),
        r"^runc version (\S+)$",
        cgo=True,
        tags=("seccomp", "urfave_cli_no_docs"),
        buildmode="pie",
        symbols=(("main.gitCommit", "{commit}"),),
        must_print=(r"^libseccomp: \d+\.\d+\.\d+$",),
        prints_v=False,
    )


# containerd's Makefile (+ Makefile.linux): containerd and ctr with cgo, -buildmode=pie, -tags
# urfave_cli_no_docs, "-s -w"; the shim static (CGO_ENABLED=0, + no_grpc, -extldflags -static).
# no_btrfs: the btrfs snapshotter needs libbtrfs-dev's headers and the lab's containerd never uses it.
_CONTAINERD_SYMBOLS = (
    (f"{CONTAINERD_VERSION}.Version", "{version}"),
    (f"{CONTAINERD_VERSION}.Revision", "{commit}"),
    (f"{CONTAINERD_VERSION}.Package", "github.com/containerd/containerd/v2"),
)


def _containerd_pie(name: str) -> Binary:
    """containerd or ctr: cgo and PIE; `--version` prints "<name> <module> v<version> ..."."""
    return Binary(
        name,
        f"github.com/containerd/containerd/v2/cmd/{name}",
        ("--version",),
        rf"^{name} \S+ (v\S+)",
        cgo=True,
        tags=("urfave_cli_no_docs", "no_btrfs"),
        buildmode="pie",
        extra_ldflags=("-s", "-w"),
        symbols=_CONTAINERD_SYMBOLS,
    )


def _stripped(name: str, package: str, version_args: tuple[str, ...], pattern: str, commit_symbol: str) -> Binary:
    """etcd's, etcdctl's and CoreDNS's build: no cgo, "-s -w", the short commit as ``commit_symbol``'s -X
    value; the version is printed without its "v"."""
    return Binary(
        name,
        package,
        version_args,
        pattern,
        extra_ldflags=("-s", "-w"),
        symbols=((commit_symbol, "{short_commit}"),),
        prints_v=False,
    )


#: the -X symbol that carries etcd's commit, in etcd and in etcdctl
_ETCD_SHA = "go.etcd.io/etcd/api/v3/version.GitSHA"

PROJECTS: tuple[Project, ...] = (
    Project("runc-1.3.0", "runc-1.3.0", "github.com/opencontainers/runc", "runc", (_runc(),)),
    Project("runc-1.4.3", "runc-1.4.3", "github.com/opencontainers/runc", "runc", (_runc(),)),
    # cri-tools's Makefile: CGO_ENABLED=0, -trimpath, -X .../pkg/version.Version=<tag without v>
    Project(
        "cri-tools",
        "cri-tools",
        "sigs.k8s.io/cri-tools",
        "cri-tools",
        (
            Binary(
                "crictl",
                "sigs.k8s.io/cri-tools/cmd/crictl",
                ("--version",),
                r"^crictl version (\S+)$",
                symbols=(("sigs.k8s.io/cri-tools/pkg/version.Version", "{bare}"),),
                prints_v=False,
            ),
        ),
    ),
    # etcd's release build (scripts/build_lib.sh with build-binary.sh's GO_LDFLAGS="-s -w"):
    # CGO_ENABLED=0, -trimpath, -X go.etcd.io/etcd/api/v3/version.GitSHA=$(git rev-parse --short HEAD).
    # The commit is the module proxy's Origin of go.etcd.io/etcd/v3@v3.6.5 (tag v3.6.5; etcdctl/v3.6.5
    # names the same one); "short" is 7 characters here, git may abbreviate longer in etcd's repository.
    # etcd itself is the server module's main package.
    Project(
        "etcd",
        "etcd",
        "go.etcd.io/etcd/server/v3",
        "etcd",
        (
            _stripped("etcd", "go.etcd.io/etcd/server/v3", ("--version",), r"^etcd Version: (\S+)$", _ETCD_SHA),
            _stripped("etcdctl", "go.etcd.io/etcd/etcdctl/v3", ("version",), r"^etcdctl version: (\S+)$", _ETCD_SHA),
        ),
        commit="a0614505aff9b8ff469e9c59c2d979a5936d13f4",
    ),
    Project(
        "containerd",
        "containerd",
        "github.com/containerd/containerd/v2",
        "containerd",
        (
            _containerd_pie("containerd"),
            Binary(
                "containerd-shim-runc-v2",
                "github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2",
                ("-v",),
                r"^\s*Version:\s+(v\S+)$",
                tags=("urfave_cli_no_docs", "no_btrfs", "no_grpc"),
                extra_ldflags=("-extldflags", "-static", "-s", "-w"),
                symbols=_CONTAINERD_SYMBOLS,
            ),
            _containerd_pie("ctr"),
        ),
    ),
    Project(
        "kubernetes",
        ".",
        "k8s.io/kubernetes",
        "kubernetes",
        (
            _kube("kubectl", version_args=("version", "--client"), version_pattern=r"^Client Version: (v\S+)$"),
            _kube("kube-scheduler"),
            _kube("kube-controller-manager"),
            _kube("kube-apiserver"),
            _kube("kubelet", cgo=True),
        ),
    ),
    # kind's Makefile: CGO_ENABLED=0, -trimpath, -ldflags "-buildid= -w" (v0.33.0: "-s -w") and the
    # -X of its version package's gitCommit (left out: the proxy's .info of kind has no Origin).
    # `kind version` prints "kind v0.33.0 go1.27.3 linux/amd64".
    *(
        Project(
            f"kind-{bare}",
            f"kind-{bare}",
            "sigs.k8s.io/kind",
            "kind",
            (
                Binary(
                    "kind",
                    "sigs.k8s.io/kind",
                    ("version",),
                    r"^kind (v\S+) ",
                    extra_ldflags=("-buildid=", *strip, "-w"),
                    symbols=(("sigs.k8s.io/kind/pkg/cmd/kind/version.gitCommit", "{commit}"),),
                ),
            ),
            group="kind",
        )
        for bare, strip in (("0.30.0", ()), ("0.33.0", ("-s",)))
    ),
    # kubeadm and kube-proxy: in KUBE_STATIC_BINARIES (CGO_ENABLED=0), the same flags as the others
    Project(
        "kubernetes-node",
        "kubernetes-node",
        "k8s.io/kubernetes",
        "kubernetes-node",
        (
            _kube("kubeadm", version_args=("version", "-o", "short"), version_pattern=r"^(v\S+)$"),
            _kube("kube-proxy"),
        ),
        group="kind",
    ),
    # CoreDNS's Makefile: CGO_ENABLED=0, -ldflags "-s -w -X .../coremain.GitCommit=<git describe>";
    # the commit is the proxy's Origin of v1.12.1. `coredns -version` prints "CoreDNS-1.12.1".
    Project(
        "coredns",
        "coredns",
        "github.com/coredns/coredns",
        "coredns",
        (
            _stripped(
                "coredns",
                "github.com/coredns/coredns",
                ("-version",),
                r"^CoreDNS-(\S+)$",
                "github.com/coredns/coredns/coremain.GitCommit",
            ),
        ),
        commit="707c7c10acd52cb94e959e76ae233d9b76af0854",
        group="kind",
    ),
)
PROJECT_NAMES: tuple[str, ...] = tuple(p.name for p in PROJECTS)
#: the real node's projects (target cluster_tools) and the kind node images' (target kind_tools)
NODE_PROJECT_NAMES: tuple[str, ...] = tuple(p.name for p in PROJECTS if p.group == "node")
KIND_PROJECT_NAMES: tuple[str, ...] = tuple(p.name for p in PROJECTS if p.group == "kind")


def project(name: str) -> Project:
    """The catalogue row of ``name``; an unknown name is a BuildError listing the known ones."""
    for row in PROJECTS:
        if row.name == name:
            return row
    raise BuildError(f"unknown cluster tools project {name!r}; choose one of {', '.join(PROJECT_NAMES)}")


_REQUIRE_BLOCK = re.compile(r"^require\s*\((.*?)^\)", re.MULTILINE | re.DOTALL)
_REQUIRE_LINE = re.compile(r"^require\s+(\S+)\s+(\S+)", re.MULTILINE)


def required_version(gomod: str, module: str, where: str = "go.mod") -> str:
    """The version of ``module`` that the go.mod text requires (a `require` line or block entry)."""
    found = [m.group(2) for m in _REQUIRE_LINE.finditer(gomod) if m.group(1) == module]
    for block in _REQUIRE_BLOCK.finditer(gomod):
        for line in block.group(1).splitlines():
            words = line.split("//")[0].split()
            if len(words) == 2 and words[0] == module:
                found.append(words[1])
    if len(found) != 1:
        what = "does not require" if not found else f"requires {len(found)} times"
        raise BuildError(f"{where} {what} {module}; pin it with one `require {module} vX.Y.Z` line (cluster/README.md)")
    return found[0]


def cache_folder(project: Project, version: str) -> str:
    """The cache folder of a project at a version, relative to the cache root: runc-v1.3.0."""
    return f"{project.family}-{version}"


_SEMVER = re.compile(r"^v(\d+)\.(\d+)\.(\d+)(-[0-9A-Za-z.-]+)?(\+[0-9A-Za-z.-]+)?$")


def version_values(version: str, build_date: str, commit: str | None) -> dict[str, str]:
    """The values the symbol templates are filled from. gitMinor gets a "+" when the version has a
    pre-release suffix (version.sh: v1.35.0-alpha.1 -> "35+")."""
    match = _SEMVER.match(version)
    if not match:
        raise BuildError(f"version {version!r} is not vMAJOR.MINOR.PATCH; pin a released version in cluster/")
    values = {
        "version": version,
        "bare": version[1:],
        "major": match.group(1),
        "minor": match.group(2) + ("+" if match.group(4) else ""),
        "date": build_date,
    }
    if commit:
        values.update(commit=commit, short_commit=commit[:7])
    return values


def version_ldflags(binary: Binary, values: Mapping[str, str]) -> list[str]:
    """The -X flags of ``binary``, in its symbols' order; a symbol whose template needs a value not
    known (the commit) is left out, as upstream's scripts leave out what they cannot find."""
    flags = []
    for symbol, template in binary.symbols:
        names = re.findall(r"\{(\w+)\}", template)
        if any(name not in values for name in names):
            continue
        value = template.format(**values)
        if re.search(r"[\s'\"]", value):
            raise BuildError(f"-X {symbol}: value {value!r} has a space or quote; go's -ldflags could not carry it")
        flags.append(f"-X {symbol}={value}")
    return flags


def ldflags(binary: Binary, values: Mapping[str, str]) -> str:
    """The whole -ldflags argument: the version -X flags, then the binary's other linker flags."""
    return " ".join([*version_ldflags(binary, values), *binary.extra_ldflags])


def build_date(release_time: str) -> str:
    """buildDate from the module proxy's release time (the .info Time, RFC 3339): UTC, in Kubernetes's
    format %Y-%m-%dT%H:%M:%SZ, so two builds of one version carry the same date."""
    try:
        when = datetime.fromisoformat(release_time.replace("Z", "+00:00"))
    except ValueError:
        raise BuildError(f"release time {release_time!r} from the module proxy is not an RFC 3339 time") from None
    if when.tzinfo is None:
        raise BuildError(f"release time {release_time!r} has no time zone")
    return when.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def go_build_flags(binary: Binary, values: Mapping[str, str]) -> list[str]:
    """`go build`'s flags for one binary, without -p and -o (they do not change the binary):
    reproducible (-trimpath; -buildvcs=false comes with GOFLAGS) and with the binary's tags,
    build mode and linker flags."""
    args = ["-trimpath"]
    if binary.buildmode:
        args.append(f"-buildmode={binary.buildmode}")
    if binary.tags:
        args += ["-tags", ",".join(binary.tags)]
    args += ["-ldflags", ldflags(binary, values)]
    return args


def build_key(inputs: Mapping[str, object]) -> str:
    """SHA-256 of the canonical JSON of everything a binary is made from (platform.tool_build.key_inputs):
    equal keys mean the cached binary is what this build would make."""
    text = json.dumps(inputs, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def expected_version(binary: Binary, version: str) -> str:
    """What ``binary``'s version command must print for the pinned module ``version``."""
    return version if binary.prints_v else version.removeprefix("v")


def version_line(binary: Binary, output: str) -> str | None:
    """The line of a version command's output that states the version (the first match), or None."""
    pattern = re.compile(binary.version_pattern)
    return next((line for line in output.splitlines() if pattern.match(line)), None)


def printed_version(binary: Binary, output: str) -> str | None:
    """The version in a version command's output (first matching line), or None."""
    line = version_line(binary, output)
    return re.match(binary.version_pattern, line).group(1) if line is not None else None


def version_problems(binary: Binary, version: str, output: str) -> list[str]:
    """What is wrong with a version command's output for the pinned ``version`` (empty: nothing)."""
    problems = []
    want = expected_version(binary, version)
    got = printed_version(binary, output)
    if got is None:
        problems.append(f"no line matches {binary.version_pattern!r}")
    elif got != want:
        problems.append(f"it says {got}, the pin is {want}")
    for pattern in binary.must_print:
        if not any(re.match(pattern, line) for line in output.splitlines()):
            problems.append(f"no line matches {pattern!r}")
    return problems


def duration_text(seconds: float) -> str:
    """A build time for people: 0.4 s, 42 s, 3 min 05 s, 1 h 02 min."""
    if seconds < 10:
        return f"{seconds:.1f} s"
    whole = round(seconds)
    if whole < 60:
        return f"{whole} s"
    if whole < 3600:
        return f"{whole // 60} min {whole % 60:02d} s"
    return f"{whole // 3600} h {whole % 3600 // 60:02d} min"
