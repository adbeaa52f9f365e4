"""The ``throttlelab`` command: every step the Snakemake rules run, by name.

    throttlelab run --backend local --experiment E2a --variant limit1 --repeat 0 --spec '{...}' ...
    throttlelab tables --raw RAW... --out-dir results/local/ci/tables
    throttlelab report --tables ... --out results/report/local-ci/index.html

Each subcommand hands the rest of the command line to the module that does the
work (``throttlelab SUBCOMMAND --help`` shows its options); the module is only
imported when its subcommand runs, so ``throttlelab --help`` is instant and a
backend's libraries are never loaded by an analysis step. The rules call the same
entry point as ``python -m throttlelab``. Errors of the lab (``throttlelab.errors``)
end as one line on stderr and exit status 1, never a traceback.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Sequence
from dataclasses import dataclass

from throttlelab.errors import ThrottlelabError


@dataclass(frozen=True)
class Command:
    module: str  # a module with main(argv: list[str] | None) -> int
    prefix: tuple[str, ...]  # words put before the user's arguments
    summary: str
    stage: str


COMMANDS: dict[str, Command] = {
    "build-workload": Command("throttlelab.host.gobuild", (), "build cpulab in one go.mod variant", "build"),
    "cluster-tools": Command(
        "throttlelab.platform.tool_build",
        (),
        "build the pinned cluster tools (cluster/) into the cache; summary, status",
        "build",
    ),
    "build-image": Command(
        "throttlelab.platform.workload_images", (), "build the docker backend's image of one build", "build"
    ),
    "kind": Command(
        "throttlelab.platform.kind_clusters",
        (),
        "kind clusters: create, load, delete, build-podgate, build-image, preflight",
        "build",
    ),
    "kind-node": Command(
        "throttlelab.platform.kind_node_image",
        (),
        "the kind node images made here: base (debootstrap), build, build-podnet",
        "build",
    ),
    "node": Command(
        "throttlelab.platform.real_node_images", (), "the real node's workload images (OCI archives)", "build"
    ),
    "run": Command(
        "throttlelab.experiments.runner", (), "run ONE (experiment, variant, repeat) -> its raw log", "measure"
    ),
    "calibrate": Command(
        "throttlelab.experiments.pilots",
        (),
        "pilot runs before the measured ones: CPU per request, a quiet host's floor",
        "measure",
    ),
    "smoke": Command(
        "throttlelab.experiments.smoke", (), "the smallest real-cluster smoke test (kind, kubernetes)", "measure"
    ),
    "vm-batch": Command(
        "throttlelab.experiments.batch", (), "run one experiment's jobs in ONE guest (vm backend)", "measure"
    ),
    "node-up": Command(
        "throttlelab.platform.real_node",
        ("up",),
        "start the real node for a person: prints its kubeconfig, Ctrl-C takes it down",
        "measure",
    ),
    "node-sweep": Command(
        "throttlelab.platform.real_node",
        ("sweep",),
        "take down what a dead real node left: processes, cgroups, bridge, folder",
        "measure",
    ),
    "sweep": Command(
        "throttlelab.backends.docker", ("sweep",), "remove docker containers and cgroups of dead runs", "measure"
    ),
    "tables": Command("throttlelab.analysis.commands", ("tables",), "raw logs -> tidy tables", "analyse"),
    "stats": Command(
        "throttlelab.analysis.commands", ("stats",), "tidy tables -> per-run metrics and estimates", "analyse"
    ),
    "findings": Command("throttlelab.analysis.commands", ("findings",), "metrics -> the findings table", "analyse"),
    "look": Command(
        "throttlelab.analysis.commands",
        ("look",),
        "an experiment's first-stage raw logs -> whether its later repeats are measured",
        "analyse",
    ),
    "figure": Command("throttlelab.figures.draw", (), "draw figures of the registry as SVG", "report"),
    "report": Command("throttlelab.report.page", ("render",), "render the self-contained HTML report", "report"),
    "publish": Command(
        "throttlelab.report.page",
        ("publish",),
        "pack report, tables, raw logs and config with a SHA-256 manifest",
        "report",
    ),
    "verify": Command(
        "throttlelab.report.page", ("verify",), "check an unpacked archive against its manifest", "report"
    ),
    "compare": Command(
        "throttlelab.report.compare_page",
        (),
        "one page comparing the findings of several runs and published archives",
        "report",
    ),
}


def usage() -> str:
    lines = ["usage: throttlelab SUBCOMMAND [options]  (throttlelab SUBCOMMAND --help for its options)", ""]
    for stage in ("build", "measure", "analyse", "report"):
        lines.append(f"{stage}:")
        for name, cmd in COMMANDS.items():
            if cmd.stage == stage:
                lines.append(f"  {name:<15} {cmd.summary}")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help", "help"):
        print(usage())
        return 0
    name, rest = args[0], args[1:]
    cmd = COMMANDS.get(name)
    if cmd is None:
        print(f"throttlelab: unknown subcommand {name!r}\n\n{usage()}", file=sys.stderr)
        return 2
    module = importlib.import_module(cmd.module)
    try:
        return int(module.main([*cmd.prefix, *rest]) or 0)
    except ThrottlelabError as exc:
        print(f"throttlelab {name}: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
