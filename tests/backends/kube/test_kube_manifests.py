"""Every Pod manifest the kind and kubernetes backends send, validated offline against the
Kubernetes 1.34 schemas (kubernetes-validate, strict: unknown fields are errors) and against
the API server's name and label rules, which the JSON schemas do not carry.

The manifests are the ones really sent: the lab's experiments run through the Kubernetes
deployment against the loopback API server (tests/kube_api_server.py), which records every
request body. No cluster is needed, and none was used.
"""

from __future__ import annotations

import re
from unittest import mock

import pytest

kubernetes_validate = pytest.importorskip(
    "kubernetes_validate", reason="kubernetes-validate is a test dependency: pip install -e '.[test]'"
)

from kube_api_server import FakeKubeAPI  # noqa: E402
from conftest import PROJECT  # noqa: E402
from throttlelab.model import coverage, quantities as q  # noqa: E402
from throttlelab.backends.kube import manifests as mf  # noqa: E402
from throttlelab.backends.kube.kube_backend import KubeBackend, KubeDeployment  # noqa: E402
from throttlelab.backends.kube.pod_readback import container_counters, parse_cpu_stat  # noqa: E402
from throttlelab.backends.kube.run_pods import KubeSettings, NodeAccess, PodLimits  # noqa: E402
from throttlelab.model.config import load_design  # noqa: E402
from throttlelab.experiments import REGISTRY, Context  # noqa: E402
from throttlelab.model.placement import Container, Node, Pod  # noqa: E402

K8S_VERSION = "1.34.0"
WORKER = "throttlelab-new-worker"
CONTROL_PLANE = "throttlelab-new-control-plane"
#: The experiments whose every variant this test runs (the fake prints what their containers would).
EXPERIMENTS = ("E1", "E2a", "E3", "S1", "E4", "E5", "E10", "E2b", "E7", "E8", "E6", "S2")
#: Variants that cannot run on a cluster as the experiment is written, and why (see the report).
SKIPPED = {
    ("S2", "cascade-limited"): "services_experiments.py checks that the upstream answers on 127.0.0.1:<port>, "
    "which a pod on another pod's address does not"
}

DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
DNS1123_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
LABEL_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")


def check_api_rules(manifest: dict) -> None:
    """What the API server validates beyond the OpenAPI schema (apimachinery's validation)."""
    name = manifest["metadata"]["name"]
    assert len(name) <= 253 and DNS1123_SUBDOMAIN.match(name), name
    for key, value in manifest["metadata"].get("labels", {}).items():
        prefix, _, short = key.rpartition("/")
        assert len(short) <= 63 and LABEL_NAME.match(short), key
        assert not prefix or (len(prefix) <= 253 and DNS1123_SUBDOMAIN.match(prefix)), key
        assert len(value) <= 63 and LABEL_VALUE.match(value), (key, value)
    for c in manifest["spec"]["containers"]:
        assert len(c["name"]) <= 63 and DNS1123_LABEL.match(c["name"]), c["name"]
        for kind in ("requests", "limits"):
            for quantity in (c.get("resources", {}).get(kind) or {}).values():
                assert re.fullmatch(r"\d+m?", quantity), quantity


def validate(manifest: dict) -> None:
    assert kubernetes_validate.validate(manifest, K8S_VERSION, strict=True) == "1.34"
    check_api_rules(manifest)


class EveryNodeKube(KubeBackend):
    """The kubernetes backend without its refusals, so the pinned experiments (E5, E10) send their
    pods too: pinning is done outside the API (docker update on kind), the manifests are the same."""

    def untestable(self, node, load):
        return None

    def deploy(self, node, load=None):
        return _SumPods(self, node, load, self.settings, self.client)


class _SumsContainers(NodeAccess):
    def counters(self, pods, pod, container):  # the fake has no node: a pod's are its containers' summed
        if container:
            return None
        stats = [container_counters(pods, pod, c.name, None) for c in pods.node.pod(pod).containers]
        return {k: sum(s[k] for s in stats) for k in stats[0]}


class _SumPods(KubeDeployment):
    limits = PodLimits(poll_s=0.02)

    def __init__(self, *args):
        super().__init__(*args, access=_SumsContainers())


@pytest.fixture(scope="module")
def sent_manifests(tmp_path_factory):
    """Run every variant of EXPERIMENTS (ci profile) through the deployment; every Pod POSTed."""
    api = FakeKubeAPI(pending_s=0.02, deletion_s=0.02).start()
    api.images |= {"cpulab-kind:go124mod", "cpulab-kind:go125mod"}
    kubeconfig = api.write_kubeconfig(tmp_path_factory.mktemp("kube") / "kubeconfig")
    settings = KubeSettings(
        kubeconfig=kubeconfig,
        context="kind-throttlelab-new",
        worker_node=WORKER,
        load_node=CONTROL_PLANE,
        pull_policy="Never",
    )
    design = load_design({"profile": "ci"}, PROJECT / "config")
    ran = []
    # E6 scrapes the fake's cAdvisor; at the ci profile's scale (scrapes 1.5 s apart) it reads every 0.5 s
    api.housekeeping_s = 0.5
    at_ci_scale = mock.patch.object(coverage, "KUBELET_HOUSEKEEPING_S", 0.5)
    at_ci_scale.start()
    try:
        for experiment in EXPERIMENTS:
            if experiment not in design.experiments:
                continue
            for variant, spec in design.experiments[experiment].variants.items():
                if (experiment, variant) in SKIPPED or coverage.request_over_limit(spec):
                    continue  # a request above its limit: the plan leaves it out on every cluster (KUBE_REAL.md)
                if spec.settle_ms is not None:  # E5/E10: the pods are what matters here, not the waiting
                    spec = spec.with_changes(settle_ms=10, sample_ms=10)
                if experiment == "E2a":  # nor the length of the bursts
                    spec = spec.with_changes(rounds=2, interval_ms=100)
                backend = EveryNodeKube(settings, runtime=spec.runtime or "runc-new")
                api.runc = "old" if backend.runtime == "runc-old" else "new"
                ctx = Context(backend=backend, capabilities=backend.capabilities(), node_cpus=None, seed=1)
                REGISTRY[experiment](spec, ctx)
                ran.append((experiment, variant))
        assert api.live_pods() == [], "a deployment left pods behind"
        assert api.running_containers() == [], "a deployment left containers running on a node"
        yield api.sent("POST", r"/api/v1/namespaces/default/pods"), ran
    finally:
        at_ci_scale.stop()
        api.stop()


def test_every_variant_ran_and_sent_pods(sent_manifests):
    manifests, ran = sent_manifests
    design = load_design({"profile": "ci"}, PROJECT / "config")
    assert ran == [
        (e, v)
        for e in EXPERIMENTS
        if e in design.experiments
        for v, s in design.experiments[e].variants.items()
        if (e, v) not in SKIPPED and not coverage.request_over_limit(s)
    ]
    assert {"E1", "E2a", "E3", "S1", "E4", "E5", "E10"} <= {e for e, _ in ran}
    assert len(manifests) >= len(ran)
    assert any(m["metadata"]["labels"][mf.LABEL_ROLE] == "load" for m in manifests)


def test_every_manifest_sent_is_a_valid_v1_34_pod(sent_manifests):
    manifests, _ = sent_manifests
    for manifest in manifests:
        validate(manifest)


def test_every_pod_runs_on_the_worker_behind_its_gate(sent_manifests):
    manifests, _ = sent_manifests
    for manifest in manifests:
        if manifest["metadata"]["labels"][mf.LABEL_ROLE] == "load":
            continue  # the load generator: test_load_pods_go_to_the_control_plane
        spec = manifest["spec"]
        assert spec["affinity"] == mf.node_affinity(WORKER) and "nodeSelector" not in spec
        assert spec["securityContext"] == mf.pod_security_context()  # test_pod_security: the restricted standard
        assert spec["restartPolicy"] == "Never" and spec["enableServiceLinks"] is False
        assert "tolerations" not in spec  # only the load generator may go to the control-plane
        labels = manifest["metadata"]["labels"]
        assert labels[mf.LABEL_MANAGED] == "throttlelab" and labels[mf.LABEL_RUN] and labels[mf.LABEL_PID].isdigit()
        for c in spec["containers"]:
            assert c["command"][:5] == ["/podgate", "run", "-gate", f"/throttlelab/gate/{c['name']}", "--"]
            assert c["command"][5] == "/cpulab"
            assert c["image"] in ("cpulab-kind:go124mod", "cpulab-kind:go125mod") and c["imagePullPolicy"] == "Never"
            assert {"name": mf.GATE_VOLUME, "mountPath": mf.GATE_DIR} in c["volumeMounts"]
            assert c["securityContext"] == mf.container_security_context()


def test_load_pods_go_to_the_control_plane(sent_manifests):
    manifests, _ = sent_manifests
    loads = [m for m in manifests if m["metadata"]["labels"][mf.LABEL_ROLE] == "load"]
    for m in loads:
        assert m["spec"]["affinity"] == mf.node_affinity(CONTROL_PLANE)
        assert m["spec"]["tolerations"][0]["key"] == "node-role.kubernetes.io/control-plane"
        (c,) = m["spec"]["containers"]
        assert c["command"][:2] == ["/cpulab", "load"]
        # a CPU request (one CPU per load CPU the variant pins, else one), no limit: Burstable, not BestEffort
        assert set(c["resources"]) == {"requests"} and q.parse_cpu(c["resources"]["requests"]["cpu"]) >= 1000
        targets = [a.split("=", 1)[1] for a in c["command"] if a.startswith("-target=")]
        assert targets and all(t.startswith("http://10.244.") for t in ",".join(targets).split(",")), targets


def test_resources_and_env_follow_the_placement_model():
    pod = Pod(
        "e1",
        (
            Container("app", ("info",), request_milli=500, limit_milli=2000, env=(("GOMAXPROCS", "2"),)),
            Container("sidecar", ("info",), request_milli=100),
            Container(
                "limited", ("info",), variant="go125mod", limit_milli=1500, env=(("GODEBUG", "containermaxprocs=0"),)
            ),
            Container("free", ("info",)),
        ),
    )
    m = mf.pod_manifest(
        pod, node_name=WORKER, image_of=lambda v: f"cpulab-kind:{v}", ident=mf.RunIdentity.here("9-1-abcd", 9)
    )
    validate(m)
    by_name = {c["name"]: c for c in m["spec"]["containers"]}
    assert by_name["app"]["resources"] == {"requests": {"cpu": "500m"}, "limits": {"cpu": "2"}}
    assert by_name["app"]["env"] == [{"name": "GOMAXPROCS", "value": "2"}]
    assert by_name["sidecar"]["resources"] == {"requests": {"cpu": "100m"}}
    # a limit without a request: the API server would default request = limit; we write it out
    assert by_name["limited"]["resources"] == {"requests": {"cpu": "1500m"}, "limits": {"cpu": "1500m"}}
    assert by_name["limited"]["image"] == "cpulab-kind:go125mod"
    assert by_name["free"]["resources"] == {} and "env" not in by_name["free"]
    assert m["metadata"]["name"] == "tl-e1-9-1-abcd"


def test_the_load_generator_goes_to_the_control_plane_with_a_toleration():
    m = mf.load_manifest(
        ["-target=http://10.244.1.7:8080", "-rps=100", "-clump=50"],
        name="tl-load-9-1-abcd-0",
        node_name=CONTROL_PLANE,
        image="cpulab-kind:go124mod",
        ident=mf.RunIdentity.here("9-1-abcd", 9),
    )
    validate(m)
    spec = m["spec"]
    assert spec["affinity"] == {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [CONTROL_PLANE]}]}
                ]
            }
        }
    }
    assert spec["tolerations"] == [
        {"key": "node-role.kubernetes.io/control-plane", "operator": "Exists", "effect": "NoSchedule"}
    ]
    (c,) = spec["containers"]
    assert c["command"] == ["/cpulab", "load", "-target=http://10.244.1.7:8080", "-rps=100", "-clump=50"]
    assert c["resources"] == {"requests": {"cpu": "1"}}  # mf.LOAD_CPU_REQUEST_MILLI: Burstable, not BestEffort
    assert m["metadata"]["labels"][mf.LABEL_ROLE] == "load"


def test_the_load_generator_requests_the_cpus_it_is_given():
    assert mf.load_request_milli(None) == mf.LOAD_CPU_REQUEST_MILLI == 1000
    assert mf.load_request_milli("8-9") == 2000 and mf.load_request_milli("1") == 1000
    m = mf.load_manifest(
        [],
        name="x",
        node_name=CONTROL_PLANE,
        image="i",
        ident=mf.RunIdentity.here("r", 1),
        cpu_request_milli=mf.load_request_milli("6-9"),
    )
    validate(m)
    assert m["spec"]["containers"][0]["resources"] == {"requests": {"cpu": "4"}}


def test_a_schema_violation_is_caught():
    m = mf.load_manifest([], name="x", node_name=CONTROL_PLANE, image="i", ident=mf.RunIdentity.here("r", 1))
    m["spec"]["containers"][0]["resources"] = {"limit": {"cpu": "1"}}  # "limits", misspelt
    with pytest.raises(kubernetes_validate.ValidationError, match="'limit' was unexpected"):
        kubernetes_validate.validate(m, K8S_VERSION, strict=True)


@pytest.mark.parametrize(
    "args, expected",
    [
        (("serve", "-addr=127.0.0.1:0", "-work=5ms"), ["serve", "-addr=0.0.0.0:0", "-work=5ms"]),
        (("serve", "-addr", "localhost:9000"), ["serve", "-addr", "0.0.0.0:9000"]),
        (("serve", "-work=5ms"), ["serve", "-work=5ms", "-addr=0.0.0.0:8080"]),
        (("serve", "-addr=10.1.2.3:80"), ["serve", "-addr=10.1.2.3:80"]),
        (("burst", "-threads=8"), ["burst", "-threads=8"]),
        # an upstream on this host's loopback: podgate binds the upstream pod's address when the gate opens
        (
            ("serve", "-addr=127.0.0.1:0", "-upstream=http://127.0.0.1:9001"),
            ["serve", "-addr=0.0.0.0:0", "-upstream=http://{{serve:9001}}"],
        ),
        (
            ("serve", "-upstream=http://10.0.0.9:9001"),
            ["serve", "-upstream=http://10.0.0.9:9001", "-addr=0.0.0.0:8080"],
        ),
    ],
)
def test_serve_listens_on_the_pod_address(args, expected):
    assert mf.container_args(args) == expected


@pytest.mark.parametrize("milli, text", [(100, "100m"), (1000, "1"), (1500, "1500m"), (2000, "2"), (250, "250m")])
def test_cpu_quantities_round_trip(milli, text):
    assert mf.cpu_quantity(milli) == text
    assert q.parse_cpu(text) == milli


def test_label_values_are_made_safe():
    assert mf.label_value("My_Host.example.com") == "My_Host.example.com"
    assert mf.label_value("-weird host!-") == "weird-host"
    assert len(mf.label_value("x" * 100)) == 63


def test_kube_node_defaults_requests_and_takes_the_nodes_cpus():
    node = Node("node", (Pod("p", (Container("c", ("info",), limit_milli=1000),)),))
    kube = mf.kube_node(node, 10_000)
    assert kube.allocatable_milli == 10_000
    assert kube.pods[0].containers[0].request_milli == 1000
    assert kube.pods[0].qos == "burstable"  # CPU only, no memory: Burstable, as kubelet


def test_stat_parsing_v1_and_v2():
    v2 = parse_cpu_stat("usage_usec 100\nnr_periods 4\nnr_throttled 2\nthrottled_usec 30\n")
    assert v2 == {"nr_periods": 4, "nr_throttled": 2, "throttled_usec": 30, "usage_usec": 100}
    v1 = parse_cpu_stat("nr_periods 4\nnr_throttled 2\nthrottled_time 30000\n", "5000000\n")
    assert v1 == {"nr_periods": 4, "nr_throttled": 2, "throttled_usec": 30, "usage_usec": 5000}
