"""The lab's kind node images, built on this machine (what they hold: platform/kind_node_recipe.py).

Two steps, each a Snakemake job (rules/platform/kind_node.smk), each a no-op when its stamp matches:

1. ``base``: ``debootstrap`` of the Debian release kind's base image starts from, with the
   packages of its Dockerfile, into the tool cache (``<cluster_tools.cache>/kind-node/debian-<suite>-<key>/rootfs``),
   never the checkout. Nothing else is done there: the node copies it.
2. ``node``: a copy of the base; kind's base files from the kind module (modes as its Dockerfile's
   COPY lines), the systemd set-up of its Dockerfile, the cluster tools, the control plane's
   images (OCI archives FROM scratch) imported into the rootfs's containerd under kubeadm's
   names with the cluster tools' containerd run on this host against that rootfs, the pod
   network manifest; then `docker import` with the node image's entrypoint, stop signal and
   environment. Its image ID and what it holds go to the stamp the rules keep.

    throttlelab kind-node base --role new --cluster-dir cluster --settings JSON --out results/kind/node-images/base-new.json
    throttlelab kind-node build --role new --cluster-dir cluster --settings JSON --base-stamp B --podnet P --out S
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from throttlelab.errors import BuildError
from throttlelab.host import docker_engine
from throttlelab.host.docker_engine import kind_engine_client
from throttlelab.platform import oci_archive
from throttlelab.platform.tool_build import (
    ToolsSettings,
    cache_folder_lock,
    binary_path,
    go_environment,
    module_pin,
    project_dir,
    read_stamp,
    run_go,
    stamp_path,
    stamp_problem,
)
from throttlelab.host.atomic_write import write_json_atomically
from throttlelab.host.gobuild import find_go, go_build
from throttlelab.host.mounts import mounts_under
from throttlelab.platform import tool_catalogue as catalogue
from throttlelab.platform import kind_node_recipe as kn
from throttlelab.model.digest import sha256_file
from throttlelab.platform.real_node_layout import KUBELET_SYSCTLS

DEFAULT_MIRROR = "http://deb.debian.org/debian"
DEBOOTSTRAP_TIMEOUT_S = 3600


def say(message: str) -> None:
    print(message, flush=True)


def _run(argv: list[str], what: str, timeout_s: float = 600, **kwargs: Any) -> str:
    say("+ " + " ".join(argv))
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s, **kwargs)
    except FileNotFoundError:
        raise BuildError(f"{what}: {argv[0]} is not installed") from None
    except subprocess.TimeoutExpired:
        raise BuildError(f"{what}: no end after {timeout_s:.0f} s") from None
    if proc.returncode != 0:
        tail = "\n".join((proc.stderr or proc.stdout).strip().splitlines()[-30:])
        raise BuildError(f"{what} failed (exit {proc.returncode}):\n{tail}")
    return proc.stdout


# -- the kind module ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class KindModule:
    release: str  # v0.33.0
    folder: Path  # the module in the Go module cache (read-only)

    @property
    def base(self) -> Path:
        return self.folder / "images" / "base"


def kind_module(cluster_dir: Path, settings: ToolsSettings, project_name: str) -> KindModule:
    """The kind module of the project's pinned release, from the module cache (downloaded if missing)."""
    project = catalogue.project(project_name)
    pin = module_pin(cluster_dir, project)
    out = run_go(
        find_go(),
        ["mod", "download", "-json", f"{project.module}@{pin.version}"],
        pin.folder,
        go_environment(settings, cgo=False),
        f"downloading {project.module}@{pin.version}",
    )
    info = json.loads(out)
    if info.get("Error") or not info.get("Dir"):
        raise BuildError(f"{project.module}@{pin.version}: {info.get('Error') or 'no folder in the module cache'}")
    module = KindModule(pin.version, Path(info["Dir"]))
    if not (module.base / "Dockerfile").is_file():
        raise BuildError(f"{module.folder}: no images/base/Dockerfile; kind {pin.version} ships no base image recipe")
    return module


def base_recipe(module: KindModule) -> kn.BaseRecipe:
    dockerfile = module.base / "Dockerfile"
    return kn.parse_base_dockerfile(dockerfile.read_text(), str(dockerfile))


# -- step 1: the debootstrap base --------------------------------------------------------------------


#: Debian's archive signing keys (package debian-archive-keyring): the base's Release file must verify
ARCHIVE_KEYRING = "/usr/share/keyrings/debian-archive-keyring.gpg"


def node_cache(settings: ToolsSettings) -> Path:
    return settings.cache / "kind-node"


def build_base(base: kn.BaseRecipe, settings: ToolsSettings, mirror: str = DEFAULT_MIRROR) -> dict[str, Any]:
    """debootstrap the base into the tool cache (a no-op when its stamp is there); its stamp."""
    folder = node_cache(settings) / kn.base_folder(base, mirror)
    stamp_file = folder / "base.json"
    with cache_folder_lock(folder):
        stamp = read_stamp(stamp_file)
        if stamp is not None and (folder / "rootfs" / "usr" / "bin").is_dir():
            say(
                f"kind node base: {folder} is up to date (debootstrap took {stamp['seconds']} s on {stamp['built_at']})"
            )
            return {**stamp, "built_now": False}
        if shutil.which("debootstrap") is None:
            raise BuildError("the kind node base needs debootstrap (Debian: apt-get install debootstrap)")
        if not Path(ARCHIVE_KEYRING).is_file() or shutil.which("gpgv") is None:
            raise BuildError(
                f"the kind node base is verified against Debian's archive keys ({ARCHIVE_KEYRING}, with gpgv): "
                "apt-get install debian-archive-keyring gpgv"
            )
        partial = folder / "rootfs.partial"
        if partial.exists():
            _remove_tree(partial)
        packages = ",".join(base.packages + kn.EXTRA_PACKAGES)
        say(f"kind node base: debootstrap {base.suite} with {packages} into {partial} ...")
        start = time.monotonic()
        try:
            _run(
                # an explicit keyring makes debootstrap refuse a Release file it cannot verify (without one
                # it warns and goes on when no keyring is found)
                [
                    "debootstrap",
                    f"--keyring={ARCHIVE_KEYRING}",
                    "--variant=minbase",
                    f"--include={packages}",
                    base.suite,
                    str(partial),
                    mirror,
                ],
                f"debootstrap {base.suite}",
                DEBOOTSTRAP_TIMEOUT_S,
            )
        finally:
            unmount_under(partial)
        # what kind's clean-install leaves out of its image
        for leftover in ("var/lib/apt/lists", "var/cache/apt/archives"):
            for child in (partial / leftover).glob("*"):
                if child.is_file():
                    child.unlink()
        seconds = round(time.monotonic() - start, 1)
        rootfs = folder / "rootfs"
        if rootfs.exists():
            _remove_tree(rootfs)
        partial.rename(rootfs)
        versions = _run(
            ["chroot", str(rootfs), "dpkg-query", "-W", "-f", "${Package}=${Version}\\n"], "dpkg-query in the base"
        )
        stamp = {
            "suite": base.suite,
            "mirror": mirror,
            "verified_with": ARCHIVE_KEYRING,
            "packages": list(base.packages + kn.EXTRA_PACKAGES),
            "rootfs": str(rootfs),
            "installed": sorted(versions.split()),
            "seconds": seconds,
            "built_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        }
        write_json_atomically(stamp_file, stamp, indent=2)
        say(f"kind node base: {base.suite}, {len(stamp['installed'])} packages, in {seconds} s")
        return {**stamp, "built_now": True}


def unmount_under(path: Path) -> None:
    for point in mounts_under(path):
        subprocess.run(["umount", "-l", point], check=False)


def _remove_tree(path: Path) -> None:
    """rm -rf of a rootfs: its mounts undone first; rm stays on its file system, so it never
    descends into a mount it did not see undone."""
    unmount_under(path)
    subprocess.run(["rm", "-rf", "--one-file-system", str(path)], check=True)


# -- step 2: the node image -------------------------------------------------------------------------

#: (project, binary) -> where the node image has it (kind's Dockerfile and `kind build node-image`)
NODE_BINARIES = (
    ("containerd", "containerd", "/usr/local/bin/containerd"),
    ("containerd", "ctr", "/usr/local/bin/ctr"),
    ("containerd", "containerd-shim-runc-v2", "/usr/local/bin/containerd-shim-runc-v2"),
    ("cri-tools", "crictl", "/usr/local/bin/crictl"),
    ("kubernetes-node", "kubeadm", "/usr/bin/kubeadm"),
    ("kubernetes", "kubelet", "/usr/bin/kubelet"),
    ("kubernetes", "kubectl", "/usr/bin/kubectl"),
)
RUNC_PATH = "/usr/local/sbin/runc"
#: what the systemd set-up of kind's base Dockerfile removes (globs, relative to the rootfs)
SYSTEMD_REMOVED = (
    "lib/systemd/system/sysinit.target.wants/systemd-tmpfiles-setup.service",
    "lib/systemd/system/multi-user.target.wants/*",
    "etc/systemd/system/*.wants/*",
    "lib/systemd/system/local-fs.target.wants/*",
    "lib/systemd/system/sockets.target.wants/*udev*",
    "lib/systemd/system/sockets.target.wants/*initctl*",
    "lib/systemd/system/basic.target.wants/*",
)
SYSTEMD_ENABLED = ("kubelet.service", "containerd.service", "undo-mount-hacks.service")
SYSTEMD_MASKED = ("systemd-binfmt.service",)
#: the node image's metadata (kind's base Dockerfile and `kind build node-image`'s commit)
IMAGE_CHANGES = (
    "ENV container=docker",
    'ENV HTTP_PROXY="" HTTPS_PROXY="" NO_PROXY=""',
    "STOPSIGNAL SIGRTMIN+3",
    f"ENTRYPOINT {json.dumps(list(kn.ENTRYPOINT))}",
)
CATATONIT = "/usr/bin/catatonit"


def tool_path(tools: ToolsSettings, cluster_dir: Path, project_name: str, binary_name: str) -> Path:
    """A built cluster tool, checked against its stamp; a BuildError names the target that builds it."""
    project = catalogue.project(project_name)
    pin = module_pin(cluster_dir, project)
    binary = next(b for b in project.binaries if b.name == binary_name)
    folder = project_dir(tools, project, pin.version)
    path = binary_path(folder, binary)
    problem = stamp_problem(read_stamp(stamp_path(folder, binary)), path)
    if problem is not None:
        target = "cluster_tools" if project.group == "node" else "kind_tools"
        raise BuildError(
            f"the kind node image needs {binary_name} of {project_name} ({pin.version}): {problem}; "
            f"build it first: snakemake --cores 2 {target}"
        )
    return path


def inside(rootfs: Path, path: str) -> Path:
    """``path`` of the image as a path of this host (the image's absolute symlinks are not followed)."""
    return rootfs / path.lstrip("/")


def install(source: Path, rootfs: Path, path: str, mode: int) -> None:
    target = inside(rootfs, path)
    target.parent.mkdir(parents=True, exist_ok=True)
    if target.is_symlink() or target.exists():
        target.unlink()
    shutil.copyfile(source, target)
    os.chmod(target, mode)


def apply_copies(module: KindModule, base: kn.BaseRecipe, rootfs: Path) -> list[str]:
    """kind's base files into the rootfs, each COPY line in order with its mode. A glob copies the
    regular files it matches (kind's Dockerfile names each sub-folder in a COPY of its own); a folder
    source copies its tree. Returns the image paths written."""
    written = []
    for copy in base.copies:
        source = module.base / copy.source.rstrip("/")
        if copy.source.endswith("/"):
            pairs = [(f, copy.dest + str(f.relative_to(source))) for f in sorted(source.rglob("*")) if f.is_file()]
        else:
            pairs = [(f, copy.dest + f.name) for f in sorted(source.parent.glob(source.name)) if f.is_file()]
        if not pairs:
            raise BuildError(f"kind {module.release}: COPY {copy.source} matches no file in {module.base}")
        for src, path in pairs:
            install(src, rootfs, path, copy.mode)
            written.append(path)
    for folder in ("/kind", "/kind/bin"):
        os.chmod(inside(rootfs, folder), 0o755)
    return written


def set_up_systemd(rootfs: Path, init: str) -> None:
    """The systemd set-up of kind's base Dockerfile: no units wanted at boot but the node's own,
    no kernel messages in the journal, systemd as /sbin/init, kubelet, containerd and the mount
    fix-up enabled, binfmt (kernel-global) masked."""
    for pattern in SYSTEMD_REMOVED:
        for path in rootfs.glob(pattern):
            if path.is_symlink() or path.is_file():
                path.unlink()
    journald = inside(rootfs, "/etc/systemd/journald.conf")
    journald.write_text(journald.read_text() + "ReadKMsg=no\n")
    link = inside(rootfs, "/sbin/init")
    if link.is_symlink() or link.exists():
        link.unlink()
    link.symlink_to(init)
    _run(["chroot", str(rootfs), "systemctl", "enable", *SYSTEMD_ENABLED], "systemctl enable in the node")
    _run(["chroot", str(rootfs), "systemctl", "mask", *SYSTEMD_MASKED], "systemctl mask in the node")
    inside(rootfs, "/etc/kubernetes/manifests").mkdir(parents=True, exist_ok=True)


def runtime_spec(ctr: Path) -> dict[str, Any]:
    """`ctr oci spec` (no daemon needed): containerd's default spec, kind's base of cri-base.json."""
    return json.loads(_run([str(ctr), "oci", "spec"], "ctr oci spec"))


def iptables_files(rootfs: Path) -> list[oci_archive.ImageFile]:
    """kube-proxy's iptables (nft) from the node's own Debian release: the multi-call binary under
    each name kube-proxy runs, its extensions, conntrack, and every library they load (ldd in the
    rootfs). Copies, not links: a multi-call binary goes by the name it is run as."""
    sbin = "/usr/sbin"
    multi = f"{sbin}/xtables-nft-multi"
    names = ("iptables", "iptables-save", "iptables-restore", "ip6tables", "ip6tables-save", "ip6tables-restore")
    files = [oci_archive.ImageFile(inside(rootfs, multi), f"{sbin}/{n}") for n in names]
    files.append(oci_archive.ImageFile(inside(rootfs, multi), multi))
    conntrack = f"{sbin}/conntrack"
    files.append(oci_archive.ImageFile(inside(rootfs, conntrack), conntrack))
    extensions = sorted(inside(rootfs, "/usr/lib/x86_64-linux-gnu/xtables").glob("*.so"))
    for ext in extensions:
        files.append(oci_archive.ImageFile(ext, "/" + str(ext.relative_to(rootfs)), 0o644))
    libraries: set[str] = set()
    for image_path in [multi, conntrack, *("/" + str(e.relative_to(rootfs)) for e in extensions)]:
        out = _run(["chroot", str(rootfs), "ldd", image_path], f"ldd {image_path} in the node")
        for line in out.splitlines():
            words = line.split()
            lib = words[2] if "=>" in words and len(words) > 2 else (words[0] if words[0].startswith("/") else "")
            if lib.startswith("/"):
                libraries.add(lib)
    for lib in sorted(libraries):
        real = os.path.realpath(inside(rootfs, lib))
        files.append(oci_archive.ImageFile(Path(real), lib, 0o755))
    # xtables reads its lock's folder and the protocol names
    for etc in ("/etc/protocols", "/etc/ethertypes"):
        if inside(rootfs, etc).is_file():
            files.append(oci_archive.ImageFile(inside(rootfs, etc), etc, 0o644))
    return _unique(files)


def _unique(files: list[oci_archive.ImageFile]) -> list[oci_archive.ImageFile]:
    seen: dict[str, oci_archive.ImageFile] = {}
    for f in files:
        seen.setdefault(f.path, f)
    return list(seen.values())


def write_control_plane_images(
    wanted: dict[str, list[str]], binaries: dict[tuple[str, str], Path], rootfs: Path, folder: Path
) -> list[dict[str, Any]]:
    """One OCI archive FROM scratch per image of kubeadm's list (and the sandbox image); returns
    what each is: its names, archive, manifest digest."""
    folder.mkdir(parents=True, exist_ok=True)
    out = []
    for name, references in sorted(wanted.items()):
        image = kn.IMAGE_RECIPES[name]
        files = [oci_archive.ImageFile(binaries[(p.project, p.binary)], p.path) for p in image.parts]
        if image.iptables:
            files += iptables_files(rootfs)
        if image.pause:
            if not Path(CATATONIT).is_file():
                raise BuildError("the pause image is Debian's static catatonit: apt-get install catatonit")
            files.append(oci_archive.ImageFile(Path(CATATONIT), "/pause"))
        archive = folder / f"{name}.tar"
        labels = {"throttlelab": "1", "throttlelab.kind-node-image": name}
        digest = oci_archive.write_archive(archive, references[0], files, list(image.entrypoint), labels)
        out.append({"name": name, "references": references, "archive": str(archive), "digest": digest})
    return out


def containerd_import_config(root: Path, state: Path, socket: Path) -> str:
    """A containerd of the cluster tools, run on this host only to fill the rootfs's image store:
    its root is the rootfs's /var/lib/containerd, nothing else of the host is its."""

    def q(value: Path) -> str:
        return json.dumps(str(value))

    return "\n".join(
        [
            "version = 3",
            f"root = {q(root)}",
            f"state = {q(state)}",
            'disabled_plugins = ["io.containerd.grpc.v1.cri", "io.containerd.cri.v1.runtime", '
            '"io.containerd.cri.v1.images", "io.containerd.nri.v1.nri"]',
            "[grpc]",
            f"  address = {q(socket)}",
            "[ttrpc]",
            f"  address = {q(Path(str(socket) + '.ttrpc'))}",
            "[debug]",
            '  address = ""',
            "[metrics]",
            '  address = ""',
            "[plugins.'io.containerd.internal.v1.opt']",
            f"  path = {q(state / 'opt')}",
            "",
        ]
    )


def import_images(containerd: Path, ctr: Path, rootfs: Path, images: list[dict[str, Any]], work: Path) -> list[str]:
    """Import every archive into the rootfs's containerd (namespace k8s.io, pinned, not unpacked: the
    node's CRI unpacks at first use, as with kind's images) and tag each under all its names.
    Returns `ctr images list -q` afterwards."""
    state, socket = work / "state", work / "containerd.sock"
    state.mkdir(parents=True, exist_ok=True)
    config = work / "config.toml"
    config.write_text(containerd_import_config(inside(rootfs, "/var/lib/containerd"), state, socket))
    log = open(work / "containerd.log", "w")
    proc = subprocess.Popen([str(containerd), "--config", str(config)], stdout=log, stderr=subprocess.STDOUT)
    try:
        ctr_args = [str(ctr), "--address", str(socket), "--namespace", "k8s.io"]
        deadline = time.monotonic() + 60
        while True:
            if proc.poll() is not None:
                raise BuildError(f"containerd for the image import exited {proc.returncode}; see {work}/containerd.log")
            if socket.exists() and subprocess.run([*ctr_args, "version"], capture_output=True).returncode == 0:
                break
            if time.monotonic() > deadline:
                raise BuildError(f"containerd for the image import did not answer in 60 s; see {work}/containerd.log")
            time.sleep(0.2)
        for image in images:
            _run(
                [
                    *ctr_args,
                    "images",
                    "import",
                    "--label=io.cri-containerd.pinned=pinned",
                    "--no-unpack",
                    image["archive"],
                ],
                f"ctr images import {image['name']}",
            )
            first = oci_archive.full_reference(image["references"][0])
            for other in image["references"][1:]:
                _run([*ctr_args, "images", "tag", "--force", first, other], f"ctr images tag {other}")
                _run(
                    [*ctr_args, "images", "label", other, "io.cri-containerd.pinned=pinned"],
                    f"ctr images label {other}",
                )
        return _run([*ctr_args, "images", "list", "-q"], "ctr images list").split()
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()
        unmount_under(state)


def docker_import(rootfs: Path, tag: str, labels: dict[str, str]) -> str:
    """`tar` of the rootfs into `docker import`, then the node's metadata (`docker import` takes no
    STOPSIGNAL) in a one-line build FROM the imported image, which pulls nothing; the image ID."""
    say(f"+ tar -C {rootfs} -c . | docker import - (then FROM it: {'; '.join(IMAGE_CHANGES)})")
    tar = subprocess.Popen(
        ["tar", "--numeric-owner", "--xattrs", "--one-file-system", "-C", str(rootfs), "-c", "."],
        stdout=subprocess.PIPE,
    )
    try:
        proc = subprocess.run(["docker", "import", "-"], stdin=tar.stdout, capture_output=True, text=True, timeout=1800)
    finally:
        tar.stdout.close()
        tar.wait()
    if proc.returncode != 0 or tar.returncode != 0:
        raise BuildError(
            f"docker import of {rootfs} failed (tar {tar.returncode}, docker {proc.returncode}): {proc.stderr[-800:]}"
        )
    imported = proc.stdout.strip()
    try:
        client = kind_engine_client()
        dockerfile = "\n".join([f"FROM {imported}", *IMAGE_CHANGES]).encode() + b"\n"
        docker_engine.build_image(client, tag, docker_engine.build_context(dockerfile, {}), labels)
    finally:
        subprocess.run(["docker", "image", "rm", imported], capture_output=True)  # the tag keeps its layer
    return image_id(tag)


def remove_superseded(role: str, keep: str) -> list[str]:
    """Remove the engine's other node images of ``role`` (earlier keys): one image per role stays.
    One a container still runs from (a cluster made from it) is kept; `clean` first."""
    listing = subprocess.run(
        ["docker", "image", "ls", "--format", "{{.Repository}}:{{.Tag}}", kn.IMAGE_REPOSITORY],
        capture_output=True,
        text=True,
    )
    removed = []
    for tag in listing.stdout.split():
        if tag != keep and tag.startswith(f"{kn.IMAGE_REPOSITORY}:{role}-"):
            if subprocess.run(["docker", "image", "rm", tag], capture_output=True).returncode == 0:
                removed.append(tag)
    return removed


def image_id(tag: str) -> str:
    return _run(["docker", "image", "inspect", "-f", "{{.Id}}", tag], f"docker image inspect {tag}").strip()


def docker_has(tag: str) -> str | None:
    proc = subprocess.run(["docker", "image", "inspect", "-f", "{{.Id}}", tag], capture_output=True, text=True)
    return proc.stdout.strip() if proc.returncode == 0 else None


def build_node(
    recipe: kn.NodeRecipe,
    module: KindModule,
    cluster_dir: Path,
    tools: ToolsSettings,
    base_stamp: dict[str, Any],
    podnet: Path,
) -> dict[str, Any]:
    """Assemble the node image of ``recipe`` from the base and the cluster tools and `docker import` it;
    a no-op when an image of the same key is in the engine. Its stamp (tag, image ID, contents)."""
    start = time.monotonic()
    base = base_recipe(module)
    needed = {(p, b): tool_path(tools, cluster_dir, p, b) for p, b, _ in NODE_BINARIES}
    needed[(recipe.runc_project, "runc")] = tool_path(tools, cluster_dir, recipe.runc_project, "runc")
    for image in kn.IMAGE_RECIPES.values():
        for part in image.parts:
            needed[(part.project, part.binary)] = tool_path(tools, cluster_dir, part.project, part.binary)
    kube_version = module_pin(cluster_dir, catalogue.project("kubernetes-node")).version
    base_files = sorted(str(f.relative_to(module.base)) for f in (module.base / "files").rglob("*") if f.is_file())
    inputs = {
        "builder": kn.BUILDER_REVISION,
        "role": recipe.role,
        "kind": module.release,
        "kubernetes": kube_version,
        "base": {"suite": base_stamp["suite"], "installed": base_stamp["installed"]},
        "kind_files": {f: sha256_file(module.base / f) for f in base_files},
        "binaries": {f"{p}/{b}": sha256_file(path) for (p, b), path in sorted(needed.items())},
        "podnet": sha256_file(podnet),
        "catatonit": sha256_file(Path(CATATONIT)) if Path(CATATONIT).is_file() else None,
        "cni": kn.pod_network_manifest(),
        "sysctl_guard": kn.sysctl_guard_script(tuple(KUBELET_SYSCTLS)),
        "changes": list(IMAGE_CHANGES),
    }
    key = kn.node_key(inputs)
    tag = kn.node_tag(recipe.role, key)
    folder = node_cache(tools) / f"{recipe.role}-{key}"
    stamp_file = folder / "node.json"
    with cache_folder_lock(folder):
        stamp = read_stamp(stamp_file)
        have = docker_has(tag)
        if stamp is not None and have == stamp.get("image_id"):
            say(f"kind node image {tag}: up to date ({have}, built in {stamp['seconds']} s on {stamp['built_at']})")
            return {**stamp, "built_now": False}
        rootfs = folder / "rootfs"
        if rootfs.exists():
            _remove_tree(rootfs)
        say(f"kind node image {tag}: copying the base {base_stamp['rootfs']} ...")
        _run(["cp", "-a", "--reflink=auto", base_stamp["rootfs"], str(rootfs)], "copying the base rootfs", 1800)
        apply_copies(module, base, rootfs)
        set_up_systemd(rootfs, base.init)
        for project, binary, path in NODE_BINARIES:
            install(needed[(project, binary)], rootfs, path, 0o755)
        install(needed[(recipe.runc_project, "runc")], rootfs, RUNC_PATH, 0o755)
        cni_bin = inside(rootfs, "/opt/cni/bin")
        cni_bin.mkdir(parents=True, exist_ok=True)
        for plugin in kn.CNI_PLUGINS:
            install(inside(rootfs, f"/usr/lib/cni/{plugin}"), rootfs, f"/opt/cni/bin/{plugin}", 0o755)
        spec = kn.cri_base_spec(runtime_spec(needed[("containerd", "ctr")]))
        inside(rootfs, "/etc/containerd/cri-base.json").write_text(json.dumps(spec, indent=2) + "\n")
        inside(rootfs, "/kind/version").write_text(kube_version)
        guard = inside(rootfs, kn.SYSCTL_GUARD)
        guard.write_text(kn.sysctl_guard_script(tuple(KUBELET_SYSCTLS)))
        guard.chmod(0o755)
        manifests = inside(rootfs, "/kind/manifests")
        manifests.mkdir(parents=True, exist_ok=True)
        (manifests / "default-cni.yaml").write_text(kn.pod_network_manifest())
        listing = _run(
            [
                str(needed[("kubernetes-node", "kubeadm")]),
                "config",
                "images",
                "list",
                "--kubernetes-version",
                kube_version,
            ],
            "kubeadm config images list",
        )
        containerd_toml = inside(rootfs, "/etc/containerd/config.toml")
        containerd_toml.write_text(kn.containerd_config(containerd_toml.read_text()))
        sandbox = kn.sandbox_image(containerd_toml.read_text())
        wanted = kn.images_to_build(listing, sandbox)
        images = write_control_plane_images(wanted, needed, rootfs, folder / "images")
        podnet_archive = folder / "images" / "podnet.tar"
        podnet_digest = oci_archive.write_archive(
            podnet_archive,
            kn.POD_NETWORK_IMAGE,
            [oci_archive.ImageFile(podnet, "/podnet")],
            ["/podnet"],
            {"throttlelab": "1"},
        )
        images.append(
            {
                "name": "podnet",
                "references": [kn.POD_NETWORK_IMAGE],
                "archive": str(podnet_archive),
                "digest": podnet_digest,
            }
        )
        with tempfile.TemporaryDirectory(prefix="throttlelab-kind-import-") as work:
            imported = import_images(
                needed[("containerd", "containerd")], needed[("containerd", "ctr")], rootfs, images, Path(work)
            )
        labels = {"throttlelab": "1", "throttlelab.kind-node.role": recipe.role, "throttlelab.kind-node.key": key}
        say(f"kind node image {tag}: docker import ...")
        ident = docker_import(rootfs, tag, labels)
        _remove_tree(rootfs)
        for old in remove_superseded(recipe.role, tag):
            say(f"kind node image: removed the superseded {old}")
        stamp = {
            "role": recipe.role,
            "tag": tag,
            "image_id": ident,
            "key": key,
            "kind": module.release,
            "kubernetes": kube_version,
            "runc": recipe.runc_project,
            "suite": base.suite,
            "kubeadm_images": listing.split(),
            "sandbox_image": sandbox,
            "images": images,
            "imported": imported,
            "inputs": inputs,
            "seconds": round(time.monotonic() - start, 1),
            "built_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        }
        write_json_atomically(stamp_file, stamp, indent=2)
        say(f"kind node image {tag} = {ident} in {stamp['seconds']} s")
        return {**stamp, "built_now": True}


# -- command line ------------------------------------------------------------------------------------


def _settings(text: str) -> tuple[ToolsSettings, dict[str, Any]]:
    """--settings: {"cluster_tools": {...}, "kind": {...}} (config.yaml's sections, as JSON)."""
    try:
        settings = json.loads(text)
    except ValueError as exc:
        raise BuildError(f"--settings is not JSON: {exc}") from None
    return ToolsSettings.from_mapping(settings.get("cluster_tools")), dict(settings.get("kind") or {})


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="throttlelab kind-node", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    for name in ("base", "build"):
        command = sub.add_parser(name)
        command.add_argument("--role", required=True, choices=sorted(kn.NODE_RECIPES))
        command.add_argument("--cluster-dir", type=Path, default=Path("cluster"))
        command.add_argument("--settings", default="{}", help='{"cluster_tools": {...}, "kind": {...}} as JSON')
        command.add_argument("--out", type=Path, required=True)
        if name == "build":
            command.add_argument("--base-stamp", type=Path, required=True)
            command.add_argument("--podnet", type=Path, required=True, help="the podnet binary (workload/podnet)")
    podnet = sub.add_parser("build-podnet")
    podnet.add_argument("--source", type=Path, default=Path("workload/podnet"), help="podnet's Go module")
    podnet.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    if args.command == "build-podnet":
        print(go_build(args.source, args.out, "podnet"))
        return 0
    tools, kind = _settings(args.settings)
    mirror = kind.get("debian_mirror") or DEFAULT_MIRROR
    recipe = kn.recipe(args.role)
    module = kind_module(args.cluster_dir, tools, recipe.kind_project)
    if args.command == "base":
        stamp = build_base(base_recipe(module), tools, mirror)
        write_json_atomically(args.out, {**stamp, "kind": module.release, "role": args.role}, indent=2)
        return 0
    record = build_node(recipe, module, args.cluster_dir, tools, json.loads(args.base_stamp.read_text()), args.podnet)
    write_json_atomically(args.out, record, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
