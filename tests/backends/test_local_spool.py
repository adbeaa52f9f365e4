"""The local backend spools a workload's stdout to a file and scans it while the workload runs
(find_record: waiting for a service's `listening` line, a burst's rounds). The scan must never move
where the workload writes: the child's stdout shares the spool's open file, and with it its offset.
A quick run lost X4/synchronized to a header overwritten mid-line by the next record."""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time

from throttlelab.backends.local import _Running

#: a workload writing numbered records as fast as it can, each flushed: a scan lands mid-write often
WRITER = """
import json, sys
pad = "x" * 200
for k in range({n}):
    sys.stdout.write(json.dumps({{"type": "round", "k": k, "pad": pad}}) + "\\n")
    sys.stdout.flush()
"""


def test_scanning_the_spool_while_the_workload_writes_leaves_every_line_whole():
    n = 4000
    stdout = tempfile.TemporaryFile(mode="w+")
    stderr = tempfile.TemporaryFile(mode="w+")
    proc = subprocess.Popen([sys.executable, "-c", WRITER.format(n=n)], stdout=stdout, stderr=stderr)
    run = _Running("p", "c", proc, stdout, stderr)
    scans = 0
    while proc.poll() is None:
        assert run.find_record("summary") is None  # none is written: every scan reads to the end
        scans += 1
    proc.wait()
    out = run.collect()  # a line overwritten mid-way is not JSON: collect raises, naming it
    assert [r["k"] for r in out.records] == list(range(n))
    assert scans > 3, f"only {scans} scans while it wrote: the test did not overlap them"


def test_a_record_is_found_while_the_workload_runs():
    stdout = tempfile.TemporaryFile(mode="w+")
    stderr = tempfile.TemporaryFile(mode="w+")
    script = 'import sys, time; print(\'{"type": "listening", "addr": "x"}\', flush=True); time.sleep(30)'
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=stdout, stderr=stderr)
    try:
        run = _Running("p", "c", proc, stdout, stderr)
        found = None
        for _ in range(200):
            found = run.find_record("listening")
            if found:
                break
            time.sleep(0.05)
        assert found == {"type": "listening", "addr": "x"}
    finally:
        proc.kill()
        proc.wait()
