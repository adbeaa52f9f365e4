"""The cluster tools' build (platform/tool_build.py) without compiling anything: the settings and the go
command's environment, the stamps, and a whole build driven through a stand-in `go` that writes a
stand-in binary, so the second build is seen to run no `go build` at all."""

from __future__ import annotations

import json
import os
import shutil
import textwrap
from pathlib import Path

import pytest

from conftest import PROJECT
from throttlelab.errors import BuildError
from throttlelab.platform import tool_build as build
from throttlelab.platform import tool_catalogue as catalogue


def test_the_caches_default_to_the_users_cache_folder_outside_the_checkout():
    home = build.ToolsSettings.from_mapping({}, env={"HOME": "/home/u"})
    assert home == build.ToolsSettings(
        Path("/home/u/.cache/throttlelab/cluster-tools"),
        Path("/home/u/.cache/throttlelab/go-mod"),
        Path("/home/u/.cache/throttlelab/go-build"),
    )
    xdg = build.ToolsSettings.from_mapping(
        {"cache": None, "go_mod_cache": "/srv/mod"}, env={"HOME": "/home/u", "XDG_CACHE_HOME": "/var/cache/u"}
    )
    assert xdg.cache == Path("/var/cache/u/throttlelab/cluster-tools") and xdg.go_mod_cache == Path("/srv/mod")
    with pytest.raises(BuildError, match="cluster_tools.cache: 'tools' is not an absolute path"):
        build.ToolsSettings.from_mapping({"cache": "tools"}, env={"HOME": "/home/u"})
    with pytest.raises(BuildError, match="unknown setting gomodcache"):
        build.ToolsSettings.from_mapping({"gomodcache": "/x"}, env={"HOME": "/home/u"})


def test_the_go_command_gets_the_projects_caches_the_local_toolchain_and_fixed_flags():
    settings = build.ToolsSettings(Path("/c/tools"), Path("/c/mod"), Path("/c/build"))
    env = build.go_environment(
        settings,
        cgo=True,
        base={
            "PATH": "/bin",
            "GOPROXY": "https://proxy.example",
            "GOFLAGS": "-mod=vendor",
            "GOOS": "windows",
            "GOWORK": "/w/go.work",
        },
    )
    assert env == {
        "PATH": "/bin",
        "GOPROXY": "https://proxy.example",
        "GOMODCACHE": "/c/mod",
        "GOCACHE": "/c/build",
        "GOFLAGS": "-mod=readonly -modcacherw -buildvcs=false",
        "GOTOOLCHAIN": "local",
        "GOWORK": "off",
        "CGO_ENABLED": "1",
    }
    assert build.go_environment(settings, cgo=False, base={})["CGO_ENABLED"] == "0"


def test_a_stamp_is_good_only_for_its_key_and_the_very_binary_it_describes(tmp_path):
    path = tmp_path / "runc"
    path.write_bytes(b"binary")
    stamp = {"key": "k1", "sha256": build.sha256_file(path)}
    assert build.stamp_problem(stamp, path, "k1") is None
    assert build.stamp_problem(None, path, "k1") == "not built"
    assert build.stamp_problem(stamp, path, "k2") == "built from other inputs"
    path.write_bytes(b"changed")
    assert build.stamp_problem(stamp, path, "k1") == f"{path} differs from the one built"
    path.unlink()
    assert build.stamp_problem(stamp, path) == f"{path} is missing"


def test_the_seccomp_build_names_the_debian_packages_it_needs(tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "gcc").symlink_to(shutil.which("true"))
    with pytest.raises(BuildError, match="apt-get install libseccomp-dev pkg-config"):
        build.check_build_tools(catalogue.project("runc-1.3.0"), {"PATH": str(bin_dir)})
    with pytest.raises(BuildError, match=r"C compiler 'cc-missing' is missing \(Debian: apt-get install gcc"):
        build.check_build_tools(catalogue.project("containerd"), {"PATH": str(bin_dir), "CC": "cc-missing"})
    build.check_build_tools(catalogue.project("cri-tools"), {"PATH": str(bin_dir)})  # no cgo: nothing needed


# A stand-in go: `env -json`, `mod download [-json m@v]` and `build -o OUT PKG`, each call logged.
# The binary it "builds" prints $FAKE_VERSION_OUTPUT.
FAKE_GO = textwrap.dedent("""\
    #!/bin/sh
    echo "$*" >> "$FAKE_GO_LOG"
    case "$1 $2" in
    "env -json") echo '{"GOVERSION": "go1.27.3", "GOOS": "linux", "GOARCH": "amd64", "GOAMD64": "v1",
                         "GOEXPERIMENT": "", "CC": "gcc"}' ;;
    "mod download")
        if [ "$3" = "-json" ]; then
            echo '{"Time": "2025-04-29T15:24:46Z"}' > "$FAKE_INFO"
            echo "{\\"Path\\": \\"m\\", \\"Info\\": \\"$FAKE_INFO\\"}"
        fi ;;
    "build -p")
        while [ "$1" != "-o" ]; do shift; done
        printf '#!/bin/sh\\nprintf "%s"\\n' "$FAKE_VERSION_OUTPUT" > "$2"; chmod +x "$2" ;;
    *) echo "unexpected: $*" >&2; exit 3 ;;
    esac
""")


@pytest.fixture
def fake_go(tmp_path, monkeypatch):
    go = tmp_path / "go"
    go.write_text(FAKE_GO)
    go.chmod(0o755)
    log = tmp_path / "go.log"
    monkeypatch.setenv("FAKE_GO_LOG", str(log))
    monkeypatch.setenv("FAKE_INFO", str(tmp_path / "v.info"))
    monkeypatch.setenv("FAKE_VERSION_OUTPUT", "runc version 1.3.0\\nspec: 1.2.1\\nlibseccomp: 2.5.4\\n")
    monkeypatch.setattr(build, "find_go", lambda: str(go))
    monkeypatch.setattr(build, "check_build_tools", lambda project, env: None)
    return log


def test_a_second_build_compiles_nothing(tmp_path, fake_go):
    settings = build.ToolsSettings(tmp_path / "tools", tmp_path / "mod", tmp_path / "gocache")
    told = []
    first = build.build_project("runc-1.3.0", PROJECT / "cluster", settings, jobs=1, tell=told.append)
    runc = tmp_path / "tools" / "runc-v1.3.0" / "bin" / "runc"
    assert first["binaries"][0]["path"] == str(runc) and first["binaries"][0]["built_now"]
    assert first["binaries"][0]["version_output"][0] == "runc version 1.3.0"
    calls = fake_go.read_text().splitlines()
    builds = [c for c in calls if c.startswith("build ")]
    assert len(builds) == 1 and builds[0].startswith(
        "build -p 1 -trimpath -buildmode=pie -tags seccomp,urfave_cli_no_docs"
    )
    assert builds[0].endswith(" github.com/opencontainers/runc")
    assert "mod download" in calls  # the project's modules, once, before compiling
    stamp = json.loads((tmp_path / "tools/runc-v1.3.0/stamps/runc.json").read_text())
    assert stamp["version"] == "v1.3.0" and stamp["inputs"]["go"]["GOVERSION"] == "go1.27.3"
    assert any("built in" in line for line in told) and told[-1].startswith("runc-1.3.0 v1.3.0: 1 built, 0 up to date")

    fake_go.write_text("")
    told.clear()
    second = build.build_project("runc-1.3.0", PROJECT / "cluster", settings, jobs=2, tell=told.append)
    calls = fake_go.read_text().splitlines()
    assert [c.split()[:2] for c in calls] == [["env", "-json"], ["mod", "download"]]  # facts only
    assert calls[1] == "mod download -json github.com/opencontainers/runc@v1.3.0"
    assert not second["binaries"][0]["built_now"] and second["binaries"][0]["sha256"] == stamp["sha256"]
    assert "up to date" in told[1] and told[-1].startswith("runc-1.3.0 v1.3.0: 0 built, 1 up to date")
    assert sorted(p.name for p in (tmp_path / "tools/runc-v1.3.0").rglob("*")) == [
        ".lock",
        "bin",
        "runc",
        "runc.json",
        "stamps",
    ]

    lines = []
    merged = build.summary([second], tell=lines.append)
    assert lines[1].split()[:7] == ["runc", "runc", "version", "1.3.0", "cached,", "built", "in"]
    assert lines[-1].startswith("cluster tools: this build ") and set(merged["projects"]) == {"runc-1.3.0"}

    runc.write_bytes(b"tampered")
    third = build.build_project("runc-1.3.0", PROJECT / "cluster", settings, tell=told.append)
    assert third["binaries"][0]["built_now"]  # a changed binary is rebuilt

    rows = {(r["project"], r["binary"].name): r["problem"] for r in build.cached(PROJECT / "cluster", settings)}
    assert rows["runc-1.3.0", "runc"] is None and rows["runc-1.4.3", "runc"] == "not built"
    assert rows["kubernetes", "kubelet"] == "not built"


def test_a_binary_that_prints_another_version_is_a_failed_build_and_is_not_kept(tmp_path, fake_go, monkeypatch):
    monkeypatch.setenv("FAKE_VERSION_OUTPUT", "runc version 1.2.0\\nlibseccomp: 2.5.4\\n")
    settings = build.ToolsSettings(tmp_path / "tools", tmp_path / "mod", tmp_path / "gocache")
    with pytest.raises(BuildError, match="its version is wrong \\(it says 1.2.0, the pin is 1.3.0\\)"):
        build.build_project("runc-1.3.0", PROJECT / "cluster", settings, tell=lambda line: None)
    assert not (tmp_path / "tools/runc-v1.3.0/bin/runc").exists()
    assert not (tmp_path / "tools/runc-v1.3.0/stamps/runc.json").exists()


def test_a_failed_go_build_says_what_go_said(tmp_path, fake_go, monkeypatch):
    broken = tmp_path / "broken-go"
    broken.write_text('#!/bin/sh\ncase "$1" in env) echo \'{}\';; mod) echo \'{"Error": "403 Forbidden"}\';; esac\n')
    broken.chmod(0o755)
    monkeypatch.setattr(build, "find_go", lambda: str(broken))
    settings = build.ToolsSettings(tmp_path / "tools", tmp_path / "mod", tmp_path / "gocache")
    with pytest.raises(BuildError, match="github.com/opencontainers/runc@v1.3.0: 403 Forbidden \\(the module proxy"):
        build.build_project("runc-1.3.0", PROJECT / "cluster", settings, tell=lambda line: None)


def test_the_go_command_is_killed_when_the_build_is_stopped(tmp_path):
    script = tmp_path / "slow-go"
    pidfile = tmp_path / "pid"
    script.write_text(f"#!/bin/sh\necho $$ > {pidfile}\nexec sleep 60\n")
    script.chmod(0o755)
    import signal
    import threading

    def stop():
        while not pidfile.exists() or not pidfile.read_text().strip():
            threading.Event().wait(0.05)
        os.kill(os.getpid(), signal.SIGUSR1)

    previous = signal.signal(signal.SIGUSR1, build._on_signal)
    try:
        threading.Thread(target=stop, daemon=True).start()
        with pytest.raises(build.Stopped, match="stopped by SIGUSR1"):
            build.run_go(str(script), ["build"], tmp_path, dict(os.environ), "go build")
    finally:
        signal.signal(signal.SIGUSR1, previous)
    pid = int(pidfile.read_text())
    assert not Path(f"/proc/{pid}").exists() or Path(f"/proc/{pid}/stat").read_text().split()[2] == "Z"
