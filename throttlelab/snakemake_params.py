"""Snakemake's params check without pandas: what the Snakefile changes in Snakemake 9 before it plans.

Before it decides that a job has nothing to do, Snakemake 9 compares each job's params with those
its last run recorded (the ``params`` rerun trigger). It serializes them through
``Persistence._serialize_param``, which picks a serializer that imports pandas whenever pandas is
installed, so that a DataFrame param is hashed by its values. pandas is a dependency of this
package, so every plan of the lab imported it: 0.6 s of a 4.3 s no-op ``snakemake report`` after a
quick run (331 jobs; benchmarks/bench_planning.py), for params that are all strings and numbers.

The change: while pandas is not imported in this process, params are serialized as Snakemake does
for a process without pandas (``_serialize_param_builtin``). That is the same text for every param:
pandas' serializer differs only for a pandas object, and none can exist before pandas is imported;
once anything has imported it, Snakemake's own choice applies again. ``install`` is idempotent and
says whether it changed anything; a Snakemake without these methods is left alone (the test of this
module then fails, saying so).
"""

from __future__ import annotations

import sys
from typing import Any

_MARK = "_throttlelab_without_pandas"


def install() -> bool:
    """Put the pandas-free choice of serializer in place of Snakemake's; True if changed now."""
    from snakemake.persistence import PersistenceBase as Persistence

    current = Persistence.__dict__.get("_serialize_param")
    if (
        not isinstance(current, property)
        or getattr(current.fget, _MARK, False)
        or not hasattr(Persistence, "_serialize_param_builtin")
    ):
        return False
    stock = current.fget

    def _serialize_param(self: Any) -> Any:
        if "pandas" not in sys.modules:
            return self._serialize_param_builtin
        return stock(self)

    setattr(_serialize_param, _MARK, True)
    Persistence._serialize_param = property(_serialize_param)
    return True


def installed() -> bool:
    """Whether Snakemake's params check in this process leaves pandas alone."""
    from snakemake.persistence import PersistenceBase as Persistence

    current = Persistence.__dict__.get("_serialize_param")
    return isinstance(current, property) and getattr(current.fget, _MARK, False)
