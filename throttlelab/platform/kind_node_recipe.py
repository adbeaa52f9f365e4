"""The lab's kind node images, made on this machine: what each image is made of.

No kindest/node image can be pulled here, and `kind build node-image` needs a registry (its base
image and the control plane's images), so the builder (``throttlelab.platform.kind_node_image``) repeats
its steps from pinned sources:

* the base: a ``debootstrap`` of the Debian release kind's base image starts from, with the
  packages its Dockerfile installs and the files it copies in, both read from the kind Go module
  of the same release (``images/base/`` ships in the module; nothing of it is copied into this
  repository);
* the node: the cluster tools (containerd, runc, crictl, kubeadm, kubelet, kubectl), Debian's CNI
  plugins, the control plane's images as OCI archives ``FROM scratch`` imported into the image's
  containerd under the names ``kubeadm config images list`` prints, a pod network manifest of the
  lab's own (:func:`pod_network_manifest`, kindnetd has no released module) and no storage manifest
  (kind then makes its host-path StorageClass, which needs no image).

Everything here is pure: parsing kind's base Dockerfile, the images' contents and names, the
build keys. One Kubernetes version (the cluster tools' v1.34.12) serves both images; the lab's two
clusters differ where it matters, in runc (and containerd, here v2.4.2 in both).
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from typing import Any

from throttlelab.errors import BuildError

#: the node images' repository in the local Docker engine; the tag is the role and the build key
IMAGE_REPOSITORY = "throttlelab/kind-node"
#: a change of how a node is assembled (here or in platform/kind_node_image.py) makes a new image: it is
#: in every node key and a param of the node image's job, so the job reruns
BUILDER_REVISION = 3
#: the settings' values of kind.node_images
NODE_IMAGE_SOURCES = ("published", "local")


@dataclass(frozen=True)
class NodeRecipe:
    """One node image: the kind release it is made for and the runc it runs."""

    role: str  # new | old (the lab's cluster)
    kind_project: str  # the cluster tools project of its kind release (platform.tool_catalogue)
    runc_project: str  # the cluster tools project of its runc


NODE_RECIPES: dict[str, NodeRecipe] = {
    "new": NodeRecipe("new", "kind-0.33.0", "runc-1.4.3"),
    "old": NodeRecipe("old", "kind-0.30.0", "runc-1.3.0"),
}


#: the cluster tools projects every node image is made of, besides its runc and kind
TOOL_PROJECTS = ("containerd", "cri-tools", "etcd", "kubernetes", "kubernetes-node", "coredns")


def node_projects(role: str) -> list[str]:
    """Every cluster tools project the node image of ``role`` is made of (its jobs' inputs)."""
    r = recipe(role)
    return [*TOOL_PROJECTS, r.runc_project, r.kind_project]


def recipe(role: str) -> NodeRecipe:
    try:
        return NODE_RECIPES[role]
    except KeyError:
        raise BuildError(f"kind node image: unknown role {role!r}; choose one of {', '.join(NODE_RECIPES)}") from None


# -- kind's base image, read from its Dockerfile in the kind module -----------------------------------


@dataclass(frozen=True)
class Copy:
    """A COPY of the base stage: files under the module's images/base/ into the image, one mode."""

    source: str  # relative to images/base/: "files/usr/local/bin/*", "files/kind/"
    dest: str  # "/usr/local/bin/", "/kind/"
    mode: int


@dataclass(frozen=True)
class BaseRecipe:
    """What kind's base image is made of: the Debian release, the packages, the files."""

    suite: str  # bookworm, trixie
    packages: tuple[str, ...]
    copies: tuple[Copy, ...]
    init: str  # what /sbin/init points at


def _instructions(dockerfile: str) -> list[str]:
    """The Dockerfile's instructions, continuation lines joined, comments dropped."""
    out: list[str] = []
    current = ""
    for raw in dockerfile.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.endswith("\\"):
            current += line[:-1] + " "
            continue
        out.append(current + line)
        current = ""
    if current:
        out.append(current)
    return out


def parse_base_dockerfile(dockerfile: str, where: str = "images/base/Dockerfile") -> BaseRecipe:
    """The first stage of kind's base Dockerfile: its Debian release (``ARG BASE_IMAGE=debian:<suite>-slim``),
    the packages of its ``clean-install``, its ``COPY --chmod`` lines and the target of /sbin/init."""
    instructions = _instructions(dockerfile)
    suite = next(
        (m.group(1) for i in instructions if (m := re.match(r"ARG BASE_IMAGE=debian:([a-z]+)-slim$", i))), None
    )
    if suite is None:
        raise BuildError(f"{where}: no `ARG BASE_IMAGE=debian:<release>-slim`; this kind release is not Debian-based")
    stage = []
    froms = 0
    for instruction in instructions:
        if instruction.startswith("FROM "):
            froms += 1
            if froms > 1:
                break
            continue
        stage.append(instruction)
    packages: tuple[str, ...] = ()
    init = ""
    copies = []
    for instruction in stage:
        copy = re.match(r"COPY --chmod=(0[0-7]{3}) (\S+) (\S+)$", instruction)
        if copy:
            dest = copy.group(3).removesuffix("*")
            copies.append(Copy(copy.group(2), dest, int(copy.group(1), 8)))
            continue
        if not instruction.startswith("RUN "):
            continue
        for step in instruction[4:].split("&&"):
            words = step.split()
            if "clean-install" in words:
                packages = tuple(words[words.index("clean-install") + 1 :])
            if words[:2] == ["ln", "-s"] and words[-1:] == ["/sbin/init"]:
                target = " ".join(words[2:-1]).strip('"')
                # `$(which systemd)` (kind v0.30.0) is /usr/lib/systemd/systemd on Debian too
                init = "/usr/lib/systemd/systemd" if "which systemd" in target else target
    if not packages:
        raise BuildError(f"{where}: no `clean-install` of packages in its first stage")
    if not copies:
        raise BuildError(f"{where}: no `COPY --chmod=` of files in its first stage")
    return BaseRecipe(suite, packages, tuple(copies), init or "/usr/lib/systemd/systemd")


#: packages the lab's node needs beyond kind's list: Debian's CNI plugins (kind builds its own
#: host-local, loopback, ptp, portmap from source) and jq's use is kind's own
EXTRA_PACKAGES = ("containernetworking-plugins",)
CNI_PLUGINS = ("host-local", "loopback", "ptp", "portmap")


def base_key(base: BaseRecipe, mirror: str) -> str:
    """The debootstrap base's cache key: release, packages, mirror (12 hex digits)."""
    text = json.dumps({"suite": base.suite, "packages": sorted(base.packages + EXTRA_PACKAGES), "mirror": mirror})
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def base_folder(base: BaseRecipe, mirror: str) -> str:
    """The base's folder under the tool cache's kind-node/: debian-bookworm-<key>."""
    return f"debian-{base.suite}-{base_key(base, mirror)}"


# -- the control plane's images -----------------------------------------------------------------------


@dataclass(frozen=True)
class ImagePart:
    """A binary of an image: which cluster tool it is (project, binary) and its path in the image."""

    project: str
    binary: str
    path: str


@dataclass(frozen=True)
class ImageRecipe:
    """One control-plane image made here FROM scratch."""

    name: str  # kubeadm's name without registry and tag: kube-apiserver, coredns, pause
    parts: tuple[ImagePart, ...]
    entrypoint: tuple[str, ...]
    iptables: bool = False  # carries the node release's iptables (kube-proxy's iptables mode)
    pause: bool = False  # Debian's static catatonit as /pause


def _kube(name: str) -> ImageRecipe:
    path = f"/usr/local/bin/{name}"
    project = "kubernetes-node" if name == "kube-proxy" else "kubernetes"
    return ImageRecipe(name, (ImagePart(project, name, path),), (path,), iptables=name == "kube-proxy")


IMAGE_RECIPES: dict[str, ImageRecipe] = {
    r.name: r
    for r in (
        _kube("kube-apiserver"),
        _kube("kube-controller-manager"),
        _kube("kube-scheduler"),
        _kube("kube-proxy"),
        ImageRecipe(
            "etcd",
            (ImagePart("etcd", "etcd", "/usr/local/bin/etcd"), ImagePart("etcd", "etcdctl", "/usr/local/bin/etcdctl")),
            ("/usr/local/bin/etcd",),
        ),
        ImageRecipe("coredns", (ImagePart("coredns", "coredns", "/coredns"),), ("/coredns",)),
        ImageRecipe("pause", (), ("/pause", "-P"), pause=True),
    )
}


def image_name(reference: str) -> str:
    """registry.k8s.io/coredns/coredns:v1.12.1 -> coredns; registry.k8s.io/etcd:3.6.5-0 -> etcd."""
    repository = reference.rsplit("@", 1)[0]
    if ":" in repository.rsplit("/", 1)[-1]:
        repository = repository.rsplit(":", 1)[0]
    return repository.rsplit("/", 1)[-1]


def images_to_build(kubeadm_list: str, sandbox_image: str) -> dict[str, list[str]]:
    """kubeadm's `config images list` output (one reference a line) and the containerd config's
    sandbox image -> {recipe name: [references it is imported under]}. A name without a recipe
    is a BuildError: kubeadm would pull it at `kind create`, and nothing can be pulled here."""
    references = [line.strip() for line in kubeadm_list.splitlines() if line.strip()]
    if not references:
        raise BuildError("`kubeadm config images list` printed no image")
    out: dict[str, list[str]] = {}
    for reference in [*references, sandbox_image]:
        name = image_name(reference)
        if name not in IMAGE_RECIPES:
            raise BuildError(
                f"kubeadm needs the image {reference}, and the node image builder has no recipe for "
                f"{name!r} (platform/kind_node_recipe.IMAGE_RECIPES)"
            )
        if reference not in out.setdefault(name, []):
            out[name].append(reference)
    return out


def sandbox_image(containerd_config: str) -> str:
    """The containerd config's sandbox (pause) image: `sandbox_image = "..."` (config version 2)
    or `sandbox = "..."` (version 3)."""
    match = re.search(r'^\s*(?:sandbox_image|sandbox)\s*=\s*"([^"]+)"', containerd_config, re.MULTILINE)
    if match is None:
        raise BuildError('kind\'s /etc/containerd/config.toml names no sandbox image (sandbox_image = "...")')
    return match.group(1)


def containerd_config(kind_config: str) -> str:
    """kind's /etc/containerd/config.toml for the lab's nodes: ``restrict_oom_score_adj = true`` (kind
    sets it only for rootless nodes). runc init lowers no process's OOM score below containerd's
    own then: lowering one needs CAP_SYS_RESOURCE, which root on the lab's machines lacks (the real
    node's difference 4, docs/KUBE_REAL.md); every pod sandbox failed without it."""
    pattern = r"^([ \t]*)restrict_oom_score_adj[ \t]*=[ \t]*false[ \t]*$"
    if not re.search(pattern, kind_config, re.MULTILINE):
        raise BuildError("kind's containerd config has no `restrict_oom_score_adj = false` to turn on")
    return re.sub(pattern, r"\1restrict_oom_score_adj = true", kind_config, count=1, flags=re.MULTILINE)


def cri_base_spec(default_spec: dict[str, Any]) -> dict[str, Any]:
    """containerd's base runtime spec for the node (/etc/containerd/cri-base.json) from `ctr oci spec`:
    kind's createContainer hook that mounts the node's product_uuid added, the rlimits removed."""
    spec = json.loads(json.dumps(default_spec))
    hooks = spec.setdefault("hooks", {})
    hooks.setdefault("createContainer", []).append({"path": "/kind/bin/mount-product-files.sh"})
    spec.get("process", {}).pop("rlimits", None)
    return spec


# -- the pod network ----------------------------------------------------------------------------------

POD_NETWORK_IMAGE = "localhost/throttlelab/podnet:v1"
CNI_CONFIG = "/etc/cni/net.d/10-throttlelab.conflist"


def pod_network_manifest(image: str = POD_NETWORK_IMAGE) -> str:
    """The lab's pod network (the node image's /kind/manifests/default-cni.yaml): a DaemonSet of podnet
    (workload/podnet) on every node, with the host network, writing the node's CNI config (ptp and
    host-local over the node's podCIDR) and a route to every other node's podCIDR via its address.
    The marker comment makes kind add the API server's address (CONTROL_PLANE_ENDPOINT, as for kindnetd):
    podnet reaches it before kube-proxy has made the service address."""
    return f"""# The lab's pod network for its kind clusters (throttlelab, platform/kind_node_recipe.py).
# kind reads the next words and adds CONTROL_PLANE_ENDPOINT to the first container's env:
# would you kindly patch this file
apiVersion: v1
kind: ServiceAccount
metadata:
  name: throttlelab-podnet
  namespace: kube-system
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: throttlelab-podnet
rules:
  - apiGroups: [""]
    resources: [nodes]
    verbs: [get, list]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: throttlelab-podnet
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: throttlelab-podnet
subjects:
  - kind: ServiceAccount
    name: throttlelab-podnet
    namespace: kube-system
---
apiVersion: apps/v1
kind: DaemonSet
metadata:
  name: throttlelab-podnet
  namespace: kube-system
  labels: {{app: throttlelab-podnet}}
spec:
  selector:
    matchLabels: {{app: throttlelab-podnet}}
  template:
    metadata:
      labels: {{app: throttlelab-podnet}}
    spec:
      hostNetwork: true
      serviceAccountName: throttlelab-podnet
      tolerations:
        - operator: Exists
      containers:
        - name: podnet
          image: {image}
          imagePullPolicy: Never
          args: ["-cni-config", "/host{CNI_CONFIG}", "-root", "/host", "-ip", "/usr/sbin/ip"]
          env:
            - name: NODE_NAME
              valueFrom: {{fieldRef: {{fieldPath: spec.nodeName}}}}
          securityContext:
            privileged: true
          resources:
            requests: {{cpu: 10m, memory: 16Mi}}
          volumeMounts:
            - {{name: host, mountPath: /host}}
      volumes:
        - name: host
          hostPath: {{path: /}}
"""


# -- the host's sysctls -------------------------------------------------------------------------------

#: the node image's entrypoint, before kind's: it keeps the node from writing the host's sysctls
SYSCTL_GUARD = "/usr/local/bin/throttlelab-sysctl-guard"
ENTRYPOINT = (SYSCTL_GUARD, "/usr/local/bin/entrypoint", "/sbin/init")


def sysctl_guard_script(kubelet_sysctls: tuple[str, ...]) -> str:
    """The node's first process (a privileged container sees the host's /proc/sys read-write, and
    most of it is the host's own: kernel.*, vm.*, fs.*). In the node's mount namespace it makes
    /proc/sys read-only but for net/ (the node's own network namespace), and covers each of kubelet's
    tunables (``kubelet_sysctls``, paths under /proc/sys) with a writable copy of the host's value, as
    the real node does for its kubelet: kubelet, systemd (its sysctl.d, the fs limits it raises as PID 1)
    and kube-proxy cannot change the host. systemd-sysctl skips a read-only /proc/sys, so the net.* keys
    of the image's sysctl.d (kind's 10-network-*.conf) are set here. Then it runs kind's entrypoint."""
    keys = " ".join(kubelet_sysctls)
    return f"""#!/bin/sh
# throttlelab (platform/kind_node_recipe.py): the node changes its own network namespace's sysctls
# and never the host's. Written into the node image; runs before kind's entrypoint.
set -eu
copies=/run/throttlelab-sysctls
mkdir -p "$copies"
for key in {keys}; do
  if [ -e "/proc/sys/$key" ]; then
    cat "/proc/sys/$key" > "$copies/$(echo "$key" | tr / .)"
  fi
done
mount --bind /proc/sys /proc/sys
mount --bind /proc/sys/net /proc/sys/net
mount -o remount,bind,ro /proc/sys
for copy in "$copies"/*; do
  [ -e "$copy" ] || continue
  mount --bind "$copy" "/proc/sys/$(basename "$copy" | tr . /)"
done
# systemd-sysctl skips a read-only /proc/sys: the node's own (net.*) keys of kind's sysctl.d here
grep -h '^net\\.' /etc/sysctl.d/*.conf 2>/dev/null | tr -d ' ' | while IFS='=' read -r key value; do
  echo "$value" > "/proc/sys/$(echo "$key" | tr . /)" || echo "throttlelab: could not set $key" >&2
done
exec "$@"
"""


# -- keys, tags ---------------------------------------------------------------------------------------


def node_key(inputs: dict[str, Any]) -> str:
    """The node image's build key from everything it is made of (12 hex digits)."""
    return hashlib.sha256(json.dumps(inputs, sort_keys=True, separators=(",", ":")).encode()).hexdigest()[:12]


def node_tag(role: str, key: str) -> str:
    """throttlelab/kind-node:new-<key>: one tag per content, so a changed recipe is a new image."""
    return f"{IMAGE_REPOSITORY}:{role}-{key}"


def node_image_problem(node_images: str, has_registry: bool) -> str | None:
    """Why the kind clusters cannot be made with `kind.node_images` as set (None: they can)."""
    if node_images not in NODE_IMAGE_SOURCES:
        return f"kind.node_images: {node_images!r} is not one of {', '.join(NODE_IMAGE_SOURCES)}"
    if node_images == "published" and not has_registry:
        return (
            "kind.node_images is published (the lab's kindest/node images, pulled by digest), and no container "
            "registry can be reached from this machine; set kind.node_images to local "
            "(--config 'kind={node_images: local}') to build the node images here"
        )
    return None
