"""Guardian of one kind deployment: the kubernetes guardian (the run's pods are deleted), and
then every node container the run pinned is set back to its cpuset and every node of the idle
cluster it paused is resumed.

A kind deployment starts `python -m throttlelab.backends.kind.kind_guardian '<json>'`;
the description is the kubernetes guardian's plus the pins and the pauses:

    {..., "pins": [{"container": NODE_CONTAINER, "restore_to": CPUSET}, ...],
          "pauses": [NODE_CONTAINER, ...]}
"""

from __future__ import annotations

import sys
from typing import Any

from throttlelab.errors import every_step
from throttlelab.backends.kube import kube_guardian as guardian
from throttlelab.platform.kind_pauses import resume_described
from throttlelab.platform.kind_pins import restore_described


def undo_nodes(desc: dict[str, Any]) -> list[str]:
    """Restore the pins and resume the paused nodes; both are tried, whatever the other does."""
    return every_step([lambda: restore_described(desc), lambda: resume_described(desc)])


def main(argv: list[str]) -> int:
    return guardian.main(argv, also=undo_nodes)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
