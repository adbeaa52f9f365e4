"""host/atomic_write.py: a file is written whole or not at all, and a JSON document as each caller lays it out."""

from __future__ import annotations

import pytest

from throttlelab.host.atomic_write import write_json_atomically, write_text_atomically


def test_a_json_document_is_laid_out_as_asked_and_ends_with_a_newline(tmp_path):
    path = tmp_path / "new" / "stamp.json"
    write_json_atomically(path, {"b": 1, "a": [2]})
    assert path.read_text() == '{\n "a": [\n  2\n ],\n "b": 1\n}\n'
    write_json_atomically(path, {"b": 1, "a": 2}, indent=2, sort_keys=False)
    assert path.read_text() == '{\n  "b": 1,\n  "a": 2\n}\n'
    assert [p.name for p in path.parent.iterdir()] == ["stamp.json"]  # no temporary file left beside it


def test_a_write_that_fails_leaves_the_old_file_and_no_temporary_one(tmp_path):
    path = tmp_path / "log.jsonl"
    write_text_atomically(path, "old\n")
    with pytest.raises(TypeError):
        write_text_atomically(path, None)  # fails while writing, after the temporary file exists
    assert path.read_text() == "old\n"
    assert [p.name for p in tmp_path.iterdir()] == ["log.jsonl"]
