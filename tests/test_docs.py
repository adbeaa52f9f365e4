"""The repository's documents: the README stays short and renders every table whole, every citation of the
method (docs/LAB.md §N, docs/STATISTICS.md §N) names a section that exists, every module or rule file a
document or comment names exists, and nothing refers to files outside the repository."""

from __future__ import annotations

import re
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from markdown_it import MarkdownIt

PROJECT = Path(__file__).resolve().parents[1]
CITATION = re.compile(r"docs/(LAB|STATISTICS)\.md §(\d+(?:\.\d+)?)")


TEXT_SUFFIXES = {".py", ".smk", ".go", ".yaml", ".md", ".csv", ".toml", ".rst", ".j2"}


def tracked_text_files() -> list[Path]:
    """The files git tracks that a reader reads as text: code, rules, configuration, docs, CI scripts."""
    names = subprocess.run(["git", "ls-files"], cwd=PROJECT, capture_output=True, text=True, check=True).stdout
    return [
        PROJECT / name
        for name in names.split()
        if Path(name).suffix in TEXT_SUFFIXES or name == "Snakefile" or name.startswith(".ci/")
    ]


def found_in_tracked_files(pattern: re.Pattern) -> Iterator[tuple[Path, str, Any]]:
    """Every match of ``pattern`` (as findall gives it) in the tracked text files but this one (its own
    examples), with its file and where it stands ("path:line")."""
    for path in tracked_text_files():
        if path == Path(__file__).resolve():
            continue
        for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            for match in pattern.findall(line):
                yield path, f"{path.relative_to(PROJECT)}:{number}", match


def source_tables(text: str) -> list[int]:
    """The number of body rows of each table as written: a run of lines starting with '|', less its
    header and separator."""
    tables, run = [], 0
    for line in [*text.splitlines(), ""]:
        if line.lstrip().startswith("|"):
            run += 1
        elif run:
            tables.append(run - 2)
            run = 0
    return tables


def rendered_tables(text: str) -> list[int]:
    """The number of body rows of each table as a Markdown renderer sees them."""
    tables, rows, in_body = [], 0, False
    for token in MarkdownIt("commonmark").enable("table").parse(text):
        if token.type == "table_open":
            rows = 0
        elif token.type in ("tbody_open", "tbody_close"):
            in_body = token.type == "tbody_open"
        elif token.type == "tr_open" and in_body:
            rows += 1
        elif token.type == "table_close":
            tables.append(rows)
    return tables


def test_the_readme_is_short_and_every_table_renders_whole():
    text = (PROJECT / "README.md").read_text()
    assert len(text.splitlines()) <= 150
    written = source_tables(text)
    assert written, "the README has tables (targets, profiles, backends, outputs, docs)"
    assert rendered_tables(text) == written  # a blank line inside a table would cut it in two


def test_a_table_cut_by_a_blank_line_is_caught():
    cut = "| a | b |\n|---|---|\n| 1 | 2 |\n\n| 3 | 4 |\n"
    assert rendered_tables(cut) != source_tables(cut)


def section_numbers(doc: Path) -> set[str]:
    numbers = set()
    for line in doc.read_text().splitlines():
        match = re.match(r"#{2,4} (\d+(?:\.\d+)?)[. ]", line)
        if match:
            numbers.add(match.group(1))
    return numbers


def test_every_citation_of_the_method_names_a_section_that_exists():
    sections = {name: section_numbers(PROJECT / "docs" / f"{name}.md") for name in ("LAB", "STATISTICS")}
    assert {"1", "2", "2.6", "4", "5"} <= sections["LAB"] and {str(n) for n in range(1, 9)} <= sections["STATISTICS"]
    unresolved = [
        f"{where}: docs/{doc}.md §{section}"
        for _, where, (doc, section) in found_in_tracked_files(CITATION)
        if section not in sections[doc]
    ]
    assert unresolved == []


#: a relative path that climbs out of its folder: ../x, ../../x/y
CLIMBING_PATH = re.compile(r"(?<![\w./])((?:\.\./)+[\w.-]+(?:/[\w.-]+)*)")


def test_nothing_refers_to_files_outside_the_repository():
    """Every ../ path a tracked file names lands on a file or folder of the repository, seen from that file's
    folder: a reader of the repository can open whatever it points to."""
    outside = []
    for path, where, target in found_in_tracked_files(CLIMBING_PATH):
        landed = (path.parent / target).resolve()
        if not landed.is_relative_to(PROJECT) or not landed.exists():
            outside.append(f"{where}: {target}")
    assert outside == []


#: An absolute path to a script or document (``/x/y/z.sh``), and the top-level folders of a Linux system (and of a
#: kind node image) under which such a path names the machine's own files rather than someone's workspace.
ABSOLUTE_SCRIPT = re.compile(r"(?<![\w.~$}])/([\w.-]+)/(?:[\w.-]+/)*[\w.-]+\.(?:sh|py|md)\b")
SYSTEM_FOLDERS = {
    "bin",
    "boot",
    "dev",
    "etc",
    "kind",
    "lib",
    "lib64",
    "opt",
    "proc",
    "run",
    "sbin",
    "sys",
    "tmp",
    "usr",
    "var",
}


def test_no_script_or_document_is_cited_from_a_workspace_outside_the_repository():
    """A measurement's command is written out, not cited as a script in the measuring developer's workspace,
    which no reader of the repository has."""
    named = [f"{where}: {folder}" for _, where, folder in found_in_tracked_files(ABSOLUTE_SCRIPT)]
    assert [n for n in named if n.rsplit(": ", 1)[1] not in SYSTEM_FOLDERS] == []


def test_a_workspace_script_is_caught_and_a_system_one_is_not():
    assert ABSOLUTE_SCRIPT.findall("(`/home/dev/bench/quick.sh`: a fresh clone)") == ["home"]
    assert [f for f in ABSOLUTE_SCRIPT.findall("/usr/lib/x.py and /kind/bin/mount.sh") if f not in SYSTEM_FOLDERS] == []


def test_a_path_out_of_the_repository_is_caught():
    assert CLIMBING_PATH.findall("see ../notes/method.md and ../../x") == ["../notes/method.md", "../../x"]
    assert CLIMBING_PATH.findall("docs/LAB.md, ./run, a..b") == []


#: A module or rule file named by its path: from the repository's root (throttlelab/..., rules/..., tests/...),
#: or from the package's folder (platform/kind_clusters.py), the backends' (kind/node_cgroups.py) or the
#: analysis' (findings/engine.py), as the docs and comments name them.
NAMED_FILE = re.compile(
    r"(?<![\w./<{-])((?:throttlelab|rules|tests|platform|backends|host|model|experiments|analysis|figures|report"
    r"|kind|kube|node|findings|metrics)/[\w/]+\.(?:py|smk))\b"
)
NAMED_FROM = ("", "throttlelab/", "throttlelab/backends/", "throttlelab/analysis/")


def test_every_module_or_rule_file_a_tracked_file_names_exists():
    """A module that moved leaves no document or comment naming its old path."""
    missing = [
        f"{where}: {name}"
        for _, where, name in found_in_tracked_files(NAMED_FILE)
        if not any((PROJECT / folder / name).exists() for folder in NAMED_FROM)
    ]
    assert missing == []


def test_a_named_file_is_found_from_the_root_the_package_or_a_backend():
    line = "see throttlelab/backends/kind/clusters.py, kind/pins.py and rules/clusters.smk, not <family>_figures.py"
    assert NAMED_FILE.findall(line) == ["throttlelab/backends/kind/clusters.py", "kind/pins.py", "rules/clusters.smk"]
    assert not any((PROJECT / folder / "kind/pins.py").exists() for folder in NAMED_FROM)
