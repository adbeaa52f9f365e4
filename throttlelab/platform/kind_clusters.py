"""kind's clusters (docs/LAB.md §4): two local kind clusters, the kind image loaded into them, and the
command line the Snakemake rules call (rules/platform/kind_clusters.smk).

* `new`: kind v0.33.0, node image kindest/node v1.34.11 (runc 1.4.3, containerd
  2.3.4): the runc >= 1.3.2 (quadratic) conversion of shares to weights;
* `old`: kind v0.30.0, node image kindest/node v1.34.0 (runc 1.3.0, containerd
  2.1.3): the linear conversion; E10 and every variant that asks for runc-old
  run here.

Each cluster is a control-plane and a worker node (config/kind/<role>.yaml,
node images pinned by digest; the folder is given with --config-dir). Every
file of a cluster stays under the project's results/ (never ~/.kube).

    throttlelab kind create --role new --settings JSON --config-dir config/kind --kubeconfig K --stamp S
    throttlelab kind load --role new --settings JSON --variant go124mod --image-stamp I --stamp S
    throttlelab kind delete --settings JSON
    throttlelab kind build-podgate --podgate-source workload/podgate --out results/build/podgate/podgate
    throttlelab kind build-image --variant go124mod --base-stamp B --podgate P --out S
    throttlelab kind preflight --settings JSON --need kind,docker
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from throttlelab.errors import BackendError, BuildError
from throttlelab.host import docker_engine
from throttlelab.host.atomic_write import write_json_atomically
from throttlelab.host.docker_engine import kind_engine_client
from throttlelab.host.facts import missing_capabilities
from throttlelab.model import results_layout as layout
from throttlelab.model.runtime import KIND_ROLE_OF_RUNTIME, RUNTIME_OF_KIND_ROLE
from throttlelab.platform import kind_node_recipe
from throttlelab.platform import workload_images as images
from throttlelab.platform.kind_nodes import node_container, node_conversion, node_exec, runc_version
from throttlelab.platform.kind_pauses import sweep_pauses, using
from throttlelab.platform.kube_client import KubeClient, KubeError
from throttlelab.platform.tool_build import ToolsSettings

#: docs/LAB.md §4's pinned node images and the kind release each is built for.
NODE_IMAGES = {
    "new": "kindest/node:v1.34.11@sha256:44e222ee2132dab25ff87301682f89eb82c7880ea3a1bf543bfe9708fd08d67d",
    "old": "kindest/node:v1.34.0@sha256:7416a61b42b1662ca6ca89f02028ac133a309a2a30ba309614e8ec94d976dc5a",
}
RUNTIME_OF_ROLE = RUNTIME_OF_KIND_ROLE  # the model's (model/runtime.py): the rules plan from it too
ROLE_OF_RUNTIME = KIND_ROLE_OF_RUNTIME


# -- the clusters -------------------------------------------------------------------------------


@dataclass(frozen=True)
class KindCluster:
    """One of the two clusters; every path is inside the project's results/ (never ~/.kube)."""

    role: str
    name: str
    binary: str
    release: str
    workdir: Path
    config_dir: Path | None = None  # the project's config/kind/ (only creating a cluster reads it)
    node_images: str = "published"  # kind.node_images: published (kindest/node by digest) or local (built here)

    @property
    def config(self) -> Path:
        if self.config_dir is None:
            raise BackendError(
                f"kind backend: no folder of kind cluster configs was given for the {self.role} "
                "cluster (--config-dir; the rules pass the project's config/kind)"
            )
        return self.config_dir / f"{self.role}.yaml"

    @property
    def directory(self) -> Path:
        return self.workdir / layout.kind_cluster_dir(self.role)

    @property
    def kubeconfig(self) -> Path:
        return self.workdir / layout.kind_kubeconfig(self.role)

    @property
    def stamp(self) -> Path:
        return self.workdir / layout.KIND_CLUSTER_STAMP.format(role=self.role)

    @property
    def node_image_stamp(self) -> Path:
        """The node image built here for this cluster (rules/platform/kind_node.smk; node_images local)."""
        return self.workdir / layout.kind_node_stamp(self.role)

    @property
    def local_config(self) -> Path:
        """The kind config a cluster of local node images is created from: the project's, with the
        node image built here in place of the published one."""
        return self.directory / "kind-config.yaml"

    @property
    def context(self) -> str:
        return f"kind-{self.name}"

    @property
    def worker(self) -> str:
        return f"{self.name}-worker"

    @property
    def control_plane(self) -> str:
        return f"{self.name}-control-plane"

    @property
    def runtime(self) -> str:
        return RUNTIME_OF_ROLE[self.role]

    def image_stamp(self, variant: str) -> Path:
        return self.workdir / layout.kind_loaded_image(self.role, variant)


def clusters_from_settings(
    kind_cfg: dict[str, Any], workdir: Path, config_dir: Path | None = None
) -> dict[str, KindCluster]:
    """config.yaml's `kind` section (schema defaults applied) -> the two clusters, their files
    under `workdir`/results, their kind configs in `config_dir` (needed to create them)."""
    node_images = kind_cfg.get("node_images", "published")
    problem = kind_node_recipe.node_image_problem(node_images, has_registry=True)
    if problem:
        raise BackendError(problem)
    binaries = {"new": kind_cfg["binary"], "old": kind_cfg["old_binary"]}
    releases = {"new": kind_cfg["release"], "old": kind_cfg["old_release"]}
    if node_images == "local":
        # the kind releases the kind_tools target builds into the tool cache
        cache = ToolsSettings.from_mapping(kind_cfg.get("cluster_tools")).cache
        binaries = {role: str(cache / f"kind-{release}" / "bin" / "kind") for role, release in releases.items()}
    names = {"new": kind_cfg["new_cluster"], "old": kind_cfg["old_cluster"]}
    return {
        role: KindCluster(role, names[role], binaries[role], releases[role], workdir, config_dir, node_images)
        for role in ("new", "old")
    }


# -- the kind binaries ---------------------------------------------------------------------------


def find_binary(binary: str) -> str | None:
    if "/" in binary:
        path = Path(binary).expanduser()
        return str(path) if path.is_file() and os.access(path, os.X_OK) else None
    return shutil.which(binary)


def kind_version(path: str) -> str:
    """`kind version` -> "v0.33.0" (its output: "kind v0.33.0 go1.24.2 linux/amd64")."""
    try:
        out = subprocess.run([path, "version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise BackendError(f"kind binary {path} does not run: {exc}") from None
    match = re.search(r"\bv\d+\.\d+\.\d+\S*", out.stdout)
    if out.returncode != 0 or not match:
        raise BackendError(f"kind binary {path}: `kind version` said {out.stdout.strip() or out.stderr.strip()!r}")
    return match.group(0)


def check_kind(cluster: KindCluster) -> str:
    """The path of the cluster's kind binary, of the right release; a BackendError says what to install."""
    key = "kind.binary" if cluster.role == "new" else "kind.old_binary"
    path = find_binary(cluster.binary)
    if path is None and cluster.node_images == "local":
        raise BackendError(
            f"kind backend: kind {cluster.release} for the {cluster.role} cluster is not in the tool cache "
            f"({cluster.binary}); with kind.node_images local it is built here: snakemake --cores 2 kind_tools"
        )
    if path is None:
        raise BackendError(
            f"kind backend: the kind binary for the {cluster.role} cluster is missing: {cluster.binary!r} "
            f"{'is not on PATH' if '/' not in cluster.binary else 'does not exist or is not executable'}. "
            f"Install kind {cluster.release} (https://kind.sigs.k8s.io/docs/user/quick-start/#installation) "
            f"and set {key} to its path"
        )
    version = kind_version(path)
    if version != cluster.release:
        raise BackendError(
            f"kind backend: {path} is kind {version}, but the {cluster.role} cluster's node image "
            f"{NODE_IMAGES[cluster.role].split('@')[0]} is built for kind {cluster.release}; "
            f"install that release and set {key} to it"
        )
    return path


# -- cluster lifecycle (the Snakemake rules call these) -----------------------------------------------------


#: the Docker network of the lab's kind nodes (kind's own is "kind", left behind by `kind delete`):
#: kind takes its name from KIND_EXPERIMENTAL_DOCKER_NETWORK, `clean` removes it with the clusters
KIND_NETWORK = "throttlelab-kind"


def kind_environment(base: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of every kind command: the lab's network, no proxy a node could inherit."""
    env = dict(os.environ if base is None else base)
    env["KIND_EXPERIMENTAL_DOCKER_NETWORK"] = KIND_NETWORK
    return env


def _run(argv: list[str], what: str, timeout_s: float, on_failure: Callable[[], Any] | None = None) -> str:
    print("+ " + " ".join(argv), file=sys.stderr, flush=True)
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s, env=kind_environment())
    except subprocess.TimeoutExpired:
        if on_failure:
            on_failure()
        raise BackendError(f"{what}: no answer after {timeout_s:.0f} s") from None
    sys.stderr.write(proc.stderr)
    if proc.returncode != 0 and on_failure:
        on_failure()
    if proc.returncode != 0:
        raise BackendError(f"{what} failed (exit {proc.returncode}): {proc.stderr.strip()[-600:]}")
    return proc.stdout


def existing_clusters(binary: str) -> list[str]:
    return _run([binary, "get", "clusters"], "kind get clusters", 60).split()


def configured_images(config: Path) -> list[str]:
    import yaml

    return [n.get("image", "") for n in (yaml.safe_load(config.read_text()) or {}).get("nodes") or []]


NODE_READY_TIMEOUT_S = 300.0


def _progress(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def create_cluster(cluster: KindCluster, kubeconfig: Path, stamp: Path) -> dict[str, Any]:
    """Create the cluster once; a cluster that already exists with the configured node image is reused.
    Not while a run on the other cluster has this one paused (platform/kind_pauses.py): that run is waited for."""
    with using(cluster.name, progress=_progress):
        sweep_pauses(kind_engine_client())  # a dead run's pause is undone before the nodes are used
        return _create_cluster(cluster, kubeconfig, stamp)


def _create_cluster(cluster: KindCluster, kubeconfig: Path, stamp: Path) -> dict[str, Any]:
    binary = check_kind(cluster)
    client = kind_engine_client()
    kubeconfig.parent.mkdir(parents=True, exist_ok=True)
    config, node_image = cluster_config(cluster, _engine_has(client))
    wanted = set(configured_images(config))
    if cluster.name in existing_clusters(binary):
        have = {node_container(client, n).attrs["Config"]["Image"] for n in (cluster.control_plane, cluster.worker)}
        if have != wanted:
            raise BackendError(
                f"kind cluster {cluster.name} exists with node image(s) {sorted(have)}, not "
                f"{sorted(wanted)}; delete it first: snakemake --cores 1 clean"
            )
        _run(
            [binary, "export", "kubeconfig", "--name", cluster.name, "--kubeconfig", str(kubeconfig)],
            "kind export kubeconfig",
            120,
        )
        reused = True
    else:
        _run(
            [
                binary,
                "create",
                "cluster",
                "--name",
                cluster.name,
                "--config",
                str(config),
                "--kubeconfig",
                str(kubeconfig),
                "--wait",
                "300s",
            ],
            f"kind create cluster {cluster.name}",
            900,
            on_failure=lambda: remove_network(client),  # kind deletes its nodes, not the network it made
        )
        reused = False
    kc = KubeClient(kubeconfig, cluster.context)
    names = [n["metadata"]["name"] for n in kc.nodes()]
    if sorted(names) != sorted([cluster.control_plane, cluster.worker]):
        raise BackendError(
            f"kind cluster {cluster.name}: nodes {names}, expected {cluster.control_plane} and {cluster.worker}"
        )
    # `kind create --wait` waits for the control plane only: the worker may still be joining
    kc.wait_nodes_ready([cluster.control_plane, cluster.worker], NODE_READY_TIMEOUT_S, poll_s=2.0)
    runc = runc_version(node_container(client, cluster.worker))
    record = {
        "cluster": cluster.name,
        "role": cluster.role,
        "kind": kind_version(binary),
        "kind_binary": str(binary),  # what `clean` deletes it with, whatever kind.node_images says then
        "node_image": sorted(wanted),
        "nodes": sorted(names),
        "server": kc.server,
        "context": cluster.context,
        "runc": runc,
        "runc_conversion": node_conversion(runc) if runc else None,
        "reused": reused,
        "node_images": cluster.node_images,
        "node_image_facts": node_image,  # local: the image built here, its ID and versions
    }
    write_json_atomically(stamp, record)
    return record


def cluster_config(cluster: KindCluster, has_image: Callable[[str], bool] | None = None) -> tuple[Path, dict[str, Any]]:
    """The kind config to create the cluster from and what its node image is. published: the
    project's config (kindest/node by digest); local: that config with the node image built here
    (its stamp, rules/platform/kind_node.smk) in place of every node's image, written beside the kubeconfig."""
    if cluster.node_images != "local":
        return cluster.config, {"source": "published", "images": sorted(set(configured_images(cluster.config)))}
    if not cluster.node_image_stamp.is_file():
        raise BackendError(
            f"kind backend: the {cluster.role} cluster's node image has not been built here "
            f"({cluster.node_image_stamp} is missing): snakemake --cores 2 kind_node_images"
        )
    built = json.loads(cluster.node_image_stamp.read_text())
    if has_image is not None and not has_image(built["image_id"]):
        raise BackendError(
            f"kind backend: the {cluster.role} cluster's node image {built['tag']} ({built['image_id'][:19]}) was "
            f"built here but is not in this Docker engine ({docker_engine.engine_host()}); build it into this one: "
            "snakemake --cores 1 kind_node_images --forcerun kind_node_image"
        )
    write_local_config(cluster.config, built["tag"], cluster.local_config)
    return cluster.local_config, {
        "source": "local",
        "tag": built["tag"],
        "image_id": built["image_id"],
        "kind": built["kind"],
        "kubernetes": built["kubernetes"],
        "runc": built["runc"],
        "debian": built["suite"],
        "key": built["key"],
    }


def write_local_config(config: Path, tag: str, out: Path) -> None:
    """The project's kind config with every node's image replaced by ``tag``."""
    import yaml

    data = yaml.safe_load(config.read_text()) or {}
    nodes = data.get("nodes") or []
    if not nodes:
        raise BackendError(f"{config}: no nodes; the lab's kind configs name a control-plane and a worker")
    for node in nodes:
        node["image"] = tag
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(
        f"# {config.name} with the node image built here (kind.node_images: local); made by throttlelab kind create\n"
        + yaml.safe_dump(data, sort_keys=False)
    )


def load_into_cluster(
    binary: str,
    tag: str,
    name: str,
    run: Callable[[list[str], str, float], str] = _run,
    nodes: tuple[str, ...] = (),
) -> str:
    """`kind load docker-image`; returns the way that worked. On a Docker engine with the containerd
    image store it fails with "content digest ... not found" (kind exports a manifest whose layers the
    engine never pulled): then `docker save` + `kind load image-archive`. kind v0.30.0 reads the
    node's `containerd config dump` and knows config versions 2 and 3 only; the node images made here
    run containerd v2.4.2, which dumps version 4 ("unknown containerd config version: 4"): then the
    archive is copied into each of ``nodes`` and imported with the node's own ctr, as kind would."""
    try:
        run([binary, "load", "docker-image", tag, "--name", name], f"kind load docker-image {tag}", 600)
        return "docker-image"
    except BackendError as exc:
        config_version = "unknown containerd config version" in str(exc)
        if not config_version and ("content digest" not in str(exc) or "not found" not in str(exc)):
            raise
        if config_version and not nodes:
            raise
    with tempfile.TemporaryDirectory(prefix="throttlelab-image-") as tmp:
        archive = str(Path(tmp) / "image.tar")
        run(["docker", "save", "-o", archive, tag], f"docker save {tag}", 600)
        if not config_version:
            run([binary, "load", "image-archive", archive, "--name", name], f"kind load image-archive {tag}", 600)
            return "image-archive"
        inside = "/kind/throttlelab-image.tar"
        for node in nodes:
            run(["docker", "cp", archive, f"{node}:{inside}"], f"docker cp {tag} to {node}", 600)
            try:
                run(
                    ["docker", "exec", node, "ctr", "--namespace=k8s.io", "images", "import", "--all-platforms"]
                    + ["--digests", inside],
                    f"ctr images import {tag} on {node}",
                    600,
                )
            finally:
                run(["docker", "exec", node, "rm", "-f", inside], f"rm {inside} on {node}", 60)
    return "ctr-import"


def load_image(cluster: KindCluster, variant: str, image_stamp: Path, stamp: Path) -> dict[str, Any]:
    """`kind load docker-image cpulab-kind:<variant>` into both nodes, then check each node has it.
    Not while a run on the other cluster has this one paused (platform/kind_pauses.py): that run is waited for."""
    with using(cluster.name, progress=_progress):
        sweep_pauses(kind_engine_client())  # a dead run's pause is undone before the nodes are used
        return _load_image(cluster, variant, image_stamp, stamp)


def _load_image(cluster: KindCluster, variant: str, image_stamp: Path, stamp: Path) -> dict[str, Any]:
    binary = check_kind(cluster)
    image = json.loads(image_stamp.read_text())
    tag = image["tag"]
    load_into_cluster(binary, tag, cluster.name, nodes=(cluster.control_plane, cluster.worker))
    client = kind_engine_client()
    for node in (cluster.control_plane, cluster.worker):
        listing = node_exec(node_container(client, node), ["crictl", "images", "-o", "json"], f"list images on {node}")
        tags = {t for img in json.loads(listing).get("images", []) for t in img.get("repoTags") or []}
        if not any(t.endswith(f"/{tag}") or t == tag for t in tags):
            raise BackendError(f"kind load: {tag} is not on node {node} after loading")
    record = {"cluster": cluster.name, "variant": variant, "tag": tag, "image_id": image["id"]}
    write_json_atomically(stamp, record)
    return record


def delete_clusters(clusters: dict[str, KindCluster]) -> list[str]:
    """Delete every lab cluster that exists, with its kubeconfig and stamps (after a run that has
    one of them paused has ended)."""
    with using(*(c.name for c in clusters.values()), progress=_progress):
        return _delete_clusters(clusters)


def deleting_kind(cluster: KindCluster) -> str | None:
    """A kind binary that can delete the cluster: any release deletes one by name, so the configured one,
    else the one its stamp says made it, else a kind the tool cache holds, else one on PATH (a cluster made
    with kind.node_images local is deleted by a plain `snakemake --cores 1 clean`)."""
    candidates = [cluster.binary]
    try:
        candidates.append(json.loads(cluster.stamp.read_text()).get("kind_binary") or "")
    except (OSError, ValueError, AttributeError):
        pass
    cache = ToolsSettings.from_mapping(None).cache
    candidates += [str(p) for p in sorted(cache.glob("kind-*/bin/kind"), reverse=True)]
    candidates.append("kind")
    return next((found for c in candidates if c and (found := find_binary(c))), None)


def _delete_clusters(clusters: dict[str, KindCluster]) -> list[str]:
    deleted = []
    for cluster in clusters.values():
        binary = deleting_kind(cluster)
        if binary is None:
            raise BackendError(
                f"kind backend: cannot delete cluster {cluster.name}: no kind binary found ({cluster.binary!r}, "
                "the tool cache, PATH); set kind.binary to one"
            )
        if cluster.name in existing_clusters(binary):
            _run(
                [binary, "delete", "cluster", "--name", cluster.name, "--kubeconfig", str(cluster.kubeconfig)],
                f"kind delete cluster {cluster.name}",
                300,
            )
            deleted.append(cluster.name)
        shutil.rmtree(cluster.directory, ignore_errors=True)
    remove_network(kind_engine_client())
    return deleted


def remove_network(client: Any, name: str = KIND_NETWORK) -> bool:
    """Remove the lab's kind network once no container is on it (kind leaves its network behind)."""
    try:
        network = client.networks.get(name)
    except Exception:  # docker.errors.NotFound: nothing to remove
        return False
    network.reload()
    if network.attrs.get("Containers"):
        return False
    network.remove()
    return True


#: where the published node images come from (kindest/node is on Docker Hub)
REGISTRY = ("registry-1.docker.io", 443)


def registry_reachable(address: tuple[str, int] = REGISTRY, timeout_s: float = 3.0) -> bool:
    """Whether a TCP connection to the registry opens (a name that does not resolve: no)."""
    import socket

    try:
        with socket.create_connection(address, timeout=timeout_s):
            return True
    except OSError:
        return False


def published_images_problem(
    clusters: list[KindCluster], have_image: Callable[[str], bool], reachable: Callable[[], bool]
) -> str | None:
    """Under kind.node_images published: the clusters' kindest/node images must be in the engine or
    pullable; None when they are, else what to set instead."""
    missing = sorted({i for c in clusters if c.node_images == "published" for i in configured_images(c.config)})
    missing = [i for i in missing if not have_image(i)]
    if not missing or reachable():
        return None
    problem = kind_node_recipe.node_image_problem("published", has_registry=False)
    return f"kind backend: {problem}. Not in this Docker engine: {', '.join(missing)}"


def _engine_has(client: Any) -> Callable[[str], bool]:
    def has(reference: str) -> bool:
        try:
            client.images.get(reference)
            return True
        except Exception:  # docker.errors.ImageNotFound, or an engine that cannot say
            return False

    return has


#: the runtimes a stock Docker engine runs a container with (they hand runc the spec as it is)
STOCK_RUNTIMES = ("runc", "io.containerd.runc.v2", "")


def privileged_problem(missing: list[str], default_runtime: str) -> str | None:
    """Why this engine cannot start kind's nodes (privileged containers), or None: a stock runtime
    is handed every capability the kernel knows, and runc fails on those root's bounding set lacks."""
    if not missing or default_runtime not in STOCK_RUNTIMES:
        return None
    return (
        "kind backend: kind's nodes are privileged containers, and Docker hands one every capability the "
        f"kernel knows; root on this machine lacks {', '.join(missing)} in its bounding set, so the engine's "
        f"runtime ({default_runtime or 'runc'}) cannot start one ('unable to apply caps: operation not "
        "permitted'). Start the lab's kind engine, whose runtime leaves those out, and point DOCKER_HOST at it: "
        'eval "$(.ci/start-kind-dockerd)" (docs/KIND_SMOKE.md)'
    )


def preflight_tools(clusters: dict[str, KindCluster], roles: list[str], need: set[str]) -> None:
    """What the kind rules need, checked before any job starts: every problem in one message."""
    problems = []
    if "kind" in need and "docker" in need:
        try:
            client = kind_engine_client()
            found = [clusters[r] for r in roles]
            problem = published_images_problem(found, _engine_has(client), registry_reachable)
            runtime = privileged_problem(missing_capabilities(), str(client.info().get("DefaultRuntime", "")))
        except BackendError:
            problem = runtime = None  # the engine's own problem is named below
        problems += [p for p in (problem, runtime) if p]
    if "kind" in need:
        for role in roles:
            try:
                check_kind(clusters[role])
            except BackendError as exc:
                problems.append(str(exc))
    if "docker" in need:
        try:
            kind_engine_client()
        except BackendError as exc:
            problems.append(str(exc))
    if problems:
        raise BackendError("\n".join(problems))


# -- command line ------------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="throttlelab kind", description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="command", required=True)
    for name in ("create", "load", "delete", "preflight"):
        s = sub.add_parser(name)
        s.add_argument("--settings", required=True, help="config.yaml's kind section as JSON")
        s.add_argument("--workdir", type=Path, default=Path.cwd())
        if name in ("create", "load"):
            s.add_argument("--role", required=True, choices=["new", "old"])
            s.add_argument("--stamp", required=True, type=Path)
        if name == "create":
            s.add_argument("--kubeconfig", required=True, type=Path)
            s.add_argument(
                "--config-dir",
                type=Path,
                default=Path("config/kind"),
                help="the kind cluster configs, <role>.yaml (default: ./config/kind)",
            )
        if name == "load":
            s.add_argument("--variant", required=True)
            s.add_argument("--image-stamp", required=True, type=Path)
        if name == "preflight":
            s.add_argument("--roles", default="new,old")
            s.add_argument("--need", default="kind,docker")
    s = sub.add_parser("build-podgate")
    s.add_argument("--out", required=True, type=Path)
    s.add_argument(
        "--podgate-source",
        type=Path,
        default=Path("workload/podgate"),
        help="podgate's Go module (default: ./workload/podgate)",
    )
    s = sub.add_parser("build-image")
    s.add_argument("--variant", required=True)
    s.add_argument("--base-stamp", required=True, type=Path)
    s.add_argument("--podgate", required=True, type=Path)
    s.add_argument("--out", required=True, type=Path)
    args = p.parse_args(argv)
    try:
        if args.command == "build-podgate":
            print(images.build_podgate(args.out, args.podgate_source))
            return 0
        if args.command == "build-image":
            record = images.build_kind_image(args.variant, args.base_stamp, args.podgate)
            write_json_atomically(args.out, record)
            print(f"{record['tag']} = {record['id']}")
            return 0
        clusters = clusters_from_settings(json.loads(args.settings), args.workdir, getattr(args, "config_dir", None))
        if args.command == "create":
            record = create_cluster(clusters[args.role], args.kubeconfig, args.stamp)
            print(
                f"cluster {record['cluster']}: nodes {', '.join(record['nodes'])}, runc {record['runc']}"
                + (" (reused)" if record["reused"] else "")
            )
        elif args.command == "load":
            record = load_image(clusters[args.role], args.variant, args.image_stamp, args.stamp)
            print(f"{record['tag']} loaded into {record['cluster']}")
        elif args.command == "delete":
            deleted = delete_clusters(clusters)
            print("deleted " + (", ".join(deleted) if deleted else "nothing (no lab cluster exists)"))
        elif args.command == "preflight":
            preflight_tools(clusters, args.roles.split(","), set(args.need.split(",")))
    except (BackendError, BuildError, KubeError) as exc:
        print(f"throttlelab: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
