"""The hot read routes' JSON encoding (api/deps.py): orjson, the same bytes as the
standard library's compact form, and the standard library for what orjson refuses;
timestamps (api/serializers.py: ts) always with their microseconds."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from shoal.api import deps
from shoal.api.serializers import ts


def stdlib(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode()


def test_same_bytes_as_the_standard_library() -> None:
    obj = {
        "uuid": "0b9e8a3c-6f1d-4a55-9f3e-2c1d7e5a9b10",
        "name": 'nœud-ß-東京 "quoted" back\\slash\ttab\nline \x01 \u2028',
        "labels": {"a": "1", "empty": ""},
        "node_count": 2_147_483_647,
        "negative": -3,
        "ratio": 0.5,
        "to_delete": False,
        "ready": True,
        "reason": None,
        "addresses": ["10.0.0.1", "10.0.0.2"],
        "nested": [{"x": []}, {}],
        "state": ("ACTIVE", 1),
    }
    assert deps.encode_json(obj) == stdlib(obj)


def test_what_orjson_refuses_is_encoded_by_the_standard_library() -> None:
    for obj in ({"big": 2**70}, {"options": {1: "int key"}}):
        assert deps.encode_json(obj) == stdlib(obj)


def test_timestamps_always_carry_microseconds() -> None:
    whole = datetime(2026, 11, 28, 10, 0, 0, 0, tzinfo=UTC)
    assert ts(whole) == "2026-11-28T10:00:00.000000+00:00"
    assert ts(whole.replace(microsecond=120)) == "2026-11-28T10:00:00.000120+00:00"
    assert ts(None) is None
