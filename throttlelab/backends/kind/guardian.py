"""Guardian of one kind deployment: the kubernetes guardian (the run's pods are deleted), and
then every node container the run pinned is set back to its cpuset.

A kind deployment starts `python -m throttlelab.backends.kind.guardian '<json>'`;
the description is the kubernetes guardian's plus the pins:

    {..., "pins": [{"container": NODE_CONTAINER, "restore_to": CPUSET}, ...]}
"""

from __future__ import annotations

import sys

from throttlelab.backends.kube import guardian
from throttlelab.backends.kind.pins import restore_described


def main(argv: list[str]) -> int:
    return guardian.main(argv, also=restore_described)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
