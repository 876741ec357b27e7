"""The scale benchmark's smoke run: the same code path as `./run bench`, small sizes.

Figures are not asserted here (timing belongs to the benchmark); what is
asserted is that every scenario completes through the real processes and that
the correctness checks inside them (exact targeted removal) hold.
"""

from __future__ import annotations

import pytest
from benchmarks import scenarios


@pytest.mark.slow
def test_overhead_and_exact_resize_smoke() -> None:
    rows = scenarios.overhead([(2, 10, 0)])
    assert [r.scenario for r in rows] == ["create 2x10", "delete 2x10"]
    assert all(r.wall_s > 0 and r.cpu_ms_per_node is not None for r in rows)
    (resize,) = scenarios.targeted_resize(20, 3)
    assert "exactly the named: True" in resize.note
