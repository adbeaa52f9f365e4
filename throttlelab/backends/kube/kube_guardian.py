"""Guardian of one kind/kubernetes deployment: cleans up even when the runner is SIGKILLed.

The deployment starts `python -m throttlelab.backends.kube.kube_guardian '<json>'` in a
session of its own, before it creates anything, and keeps a pipe to its
stdin. When the pipe closes (the runner exited, however), the guardian deletes
every pod carrying the run's label, gracefully, and waits until the API has
removed them (kubelet removes a gracefully deleted pod only once its containers
have stopped). A deployment that cleaned up by itself writes "cleaned" before
closing the pipe, and the guardian just exits. The description:

    {"kubeconfig": PATH, "context": NAME, "namespace": NS, "selector": LABELS}

A backend with more to undo runs its own guardian module, which calls `main`
here with `also`: a function of the description that undoes the rest (kind's
restores the node cpusets it pinned, throttlelab.backends.kind.kind_guardian).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from throttlelab.errors import BackendError, every_step
from throttlelab.host.processes import guardian_main

#: Undoes what a backend did beyond the pods; returns what it did, raises BackendError on a problem.
Also = Callable[[dict[str, Any]], list[str]]


def clean_up(desc: dict[str, Any], also: Also | None = None) -> list[str]:
    """Delete the run's pods, then whatever `also` undoes; returns what was done (problems raise)."""
    from throttlelab.platform.kube_client import DELETION_TIMEOUT_S, KubeClient

    def delete_pods() -> list[str]:
        kc = KubeClient(Path(desc["kubeconfig"]), desc.get("context"))
        # graceful, and waited out: the objects go only once kubelet has stopped their containers
        limit = float(desc.get("deletion_timeout_s") or DELETION_TIMEOUT_S)
        deleted = kc.delete_selected(desc["namespace"], desc["selector"], timeout_s=limit)
        return [f"deleted {len(deleted)} pod(s) ({desc['selector']})"] if deleted else []

    return every_step([delete_pods, *([lambda: also(desc)] if also is not None else [])])


def main(argv: list[str], also: Also | None = None) -> int:
    desc = json.loads(argv[0])

    def clean_up_unless_cleaned(said: bytes) -> str:
        if said.strip() == b"cleaned":  # a clean exit that removed everything itself
            return ""
        return "; ".join(clean_up(desc, also))

    return guardian_main(clean_up_unless_cleaned, BackendError)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
