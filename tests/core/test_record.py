"""The typed record and the shipped schema are one description of a journal line."""

from __future__ import annotations

import dataclasses

import pytest
from helpers import EXAMPLES, mineru, read_journal

from mineru_cli.core import Block, CacheInfo, ErrorInfo, ImageInfo, PageRecord
from mineru_cli.core.record import load_schema
from mineru_cli.core.words import CacheStatus, ErrorKind, Stage, Status


def _full_record() -> PageRecord:
    return PageRecord(
        source="a/b.pdf",
        page_index=2,
        page_count=3,
        status=Status.OK,
        engine={"name": "ocr", "version": "x", "model": {}},
        fingerprint="f" * 32,
        source_sha256="a" * 64,
        image=ImageInfo(10, 20, "b" * 64, 20, 40, 0.5),
        cache=CacheInfo(CacheStatus.NEAR_HIT, "c#0"),
        blocks=[Block("text", (1, 2, 3, 4), "hi", 0.912345, {"lines": []})],
        markdown="hi\n",
        warnings=["w"],
        timings={"total": 1.23456},
    )


def test_the_record_class_writes_exactly_the_schema_fields_in_schema_order():
    schema = load_schema()
    line = _full_record().as_dict()
    assert list(line) == list(schema["properties"]) == schema["required"]


def test_every_enum_value_is_in_the_schema_and_nothing_else():
    props = load_schema()["properties"]
    error = next(s for s in props["error"]["oneOf"] if s["type"] == "object")["properties"]
    cache = next(s for s in props["cache"]["oneOf"] if s["type"] == "object")["properties"]
    assert props["status"]["enum"] == Status.values()
    assert error["kind"]["enum"] == ErrorKind.values()
    assert error["stage"]["enum"] == Stage.values()
    assert cache["status"]["enum"] == CacheStatus.values()


def test_a_record_survives_its_json_line_both_ways(record_validator):
    rec = _full_record()
    line = rec.as_dict()
    record_validator.validate(line)
    back = PageRecord.from_dict(line)
    assert back.as_dict() == line
    assert back.blocks[0].score == 0.9123 and back.cache.source == "c#0"
    failed = dataclasses.replace(
        rec,
        status=Status.TIMEOUT,
        image=None,
        cache=None,
        blocks=[],
        error=ErrorInfo(ErrorKind.TIMEOUT, Stage.ENGINE, "slow"),
    )
    record_validator.validate(failed.as_dict())
    assert PageRecord.from_dict(failed.as_dict()) == dataclasses.replace(failed, timings={"total": 1.2346})


def test_a_value_outside_the_vocabulary_is_refused(record_validator):
    import jsonschema

    line = _full_record().as_dict()
    line["status"], line["error"] = "failed", {"kind": "oops", "stage": "engine", "message": "m"}
    with pytest.raises(jsonschema.ValidationError):
        record_validator.validate(line)
    with pytest.raises(ValueError):
        PageRecord.from_dict(line)


@pytest.mark.e2e
def test_records_the_cli_writes_read_back_as_the_same_lines(tmp_path, record_validator):
    r = mineru(
        "parse",
        str(EXAMPLES / "prose.png"),
        str(EXAMPLES / "report.pdf"),
        "--out",
        "o.jsonl",
        "--no-cache",
        "--engine",
        "ocr",
        cwd=tmp_path,
    )
    assert r.returncode == 0, r.stderr
    lines = read_journal(tmp_path / "o.jsonl", record_validator)
    assert len(lines) == 3
    for line in lines:
        assert PageRecord.from_dict(line).as_dict() == line
