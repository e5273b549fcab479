"""rankkit/models/batching.py: batch plans (rows, token budget, buckets), padding, statistics and the prefetch thread."""

from __future__ import annotations

import contextvars
import threading
import time

import pytest
import torch

from rankkit.errors import RankkitError
from rankkit.models.batching import (
    Batching,
    BatchStats,
    batching_policy,
    collecting,
    current_batching,
    length_order,
    pad_rows,
    pipelined,
    plan_batches,
    record_batch,
    widen,
)

LENGTHS = [5, 17, 9, 30, 30, 2, 64, 11, 17, 40, 3, 25]


def test_rows_only_is_the_old_plan() -> None:
    """Without a token budget or buckets: longest first, ``rows`` at a time, each padded to its longest (the
    batches before sessions, which keep CPU runs byte-identical)."""
    order = length_order(LENGTHS)
    for rows in (1, 3, 5, 100):
        plan = plan_batches(LENGTHS, Batching(rows))
        assert [b.rows for b in plan] == [order[i:i + rows] for i in range(0, len(order), rows)]
        assert [b.width for b in plan] == [max(LENGTHS[i] for i in b.rows) for b in plan]


@pytest.mark.parametrize("tokens, bucket", [(64, 1), (100, 8), (128, 16), (1000, 32), (10, 8)])
def test_token_budget_and_buckets(tokens: int, bucket: int) -> None:
    plan = plan_batches(LENGTHS, Batching(rows=1000, tokens=tokens, bucket=bucket))
    assert sorted(i for b in plan for i in b.rows) == list(range(len(LENGTHS)))  # every input once
    assert [i for b in plan for i in b.rows] == length_order(LENGTHS)  # longest first, order kept
    for b in plan:
        longest = max(LENGTHS[i] for i in b.rows)
        assert b.width % bucket == 0 and longest <= b.width < longest + bucket
        assert len(b.rows) == 1 or len(b.rows) * b.width <= tokens  # over budget only alone


def test_buckets_never_pass_the_position_limit() -> None:
    plan = plan_batches([61, 62, 63, 64], Batching(rows=2, bucket=32), limit=64)
    assert [b.width for b in plan] == [64, 64]


def test_shapes_recur_with_buckets() -> None:
    """Many lengths, few shapes: what lets a GPU reuse its kernels and plans."""
    lengths = [20 + (i * 37) % 200 for i in range(2000)]
    exact = {(len(b.rows), b.width) for b in plan_batches(lengths, Batching(rows=64))}
    bucketed = {(len(b.rows), b.width) for b in plan_batches(lengths, Batching(rows=4096, tokens=8192, bucket=32))}
    assert len(bucketed) * 4 < len(exact)


def test_pad_rows_and_widen() -> None:
    ids, mask = pad_rows([[5, 6, 7], [8]], 4, pad_id=0)
    assert ids.tolist() == [[5, 6, 7, 0], [8, 0, 0, 0]] and mask.tolist() == [[1, 1, 1, 0], [1, 0, 0, 0]]
    wide = widen({"input_ids": ids, "attention_mask": mask, "token_type_ids": mask}, 6, pad_id=9)
    assert wide["input_ids"].tolist() == [[5, 6, 7, 0, 9, 9], [8, 0, 0, 0, 9, 9]]
    assert wide["attention_mask"][:, 4:].sum() == 0 and wide["token_type_ids"].shape == (2, 6)
    assert widen({"input_ids": ids}, 3, 0)["input_ids"] is ids  # already wide enough: unchanged


def test_policy_and_statistics_are_per_context() -> None:
    assert current_batching(7) == Batching(7)
    with batching_policy(Batching(rows=99, tokens=500, bucket=8)):
        assert current_batching(7) == Batching(7, 500, 8)
    stats = BatchStats()
    record_batch(2, 10, 8)  # nobody listening: nothing happens
    with collecting(stats):
        record_batch(2, 10, 8)
        record_batch(1, 4, 8)
    assert (stats.batches, stats.rows, stats.tokens, stats.padded_tokens) == (2, 3, 14, 24)
    assert stats.padded_share == pytest.approx(1 - 14 / 24) and stats.shapes == {(2, 8), (1, 8)}


@pytest.mark.parametrize("bad", [{"rows": 0}, {"tokens": 0}, {"bucket": 0}, {"prefetch": -1}])
def test_bad_policies_are_refused(bad: dict[str, int]) -> None:
    with pytest.raises(RankkitError):
        Batching(**bad)


@pytest.mark.parametrize("depth", [0, 1, 3])
def test_pipelined_keeps_order_and_runs_ahead(depth: int) -> None:
    made: list[int] = []
    where: list[str] = []

    def prepare(x: int) -> int:
        made.append(x)
        where.append(threading.current_thread().name)
        return x * x

    out = []
    for value in pipelined(range(8), prepare, depth):
        time.sleep(0.01)
        out.append(value)
    assert out == [x * x for x in range(8)] and made == list(range(8))
    assert set(where) == ({"MainThread"} if depth == 0 else {"rankkit-prefetch"})


def test_pipelined_raises_the_producers_error_at_its_item() -> None:
    def prepare(x: int) -> int:
        if x == 3:
            raise ValueError("bad item 3")
        return x

    got = []
    with pytest.raises(ValueError, match="bad item 3"):
        for value in pipelined(range(6), prepare, 2):
            got.append(value)
    assert got == [0, 1, 2]


def test_pipelined_stops_when_the_consumer_stops() -> None:
    started = []

    def prepare(x: int) -> int:
        started.append(x)
        return x

    for value in pipelined(range(10_000), prepare, 1):
        if value == 2:
            break
    time.sleep(0.1)
    assert len(started) < 10  # the producer stopped instead of preparing everything
    assert not any(t.name == "rankkit-prefetch" and t.is_alive() for t in threading.enumerate())


def test_pipelined_sees_the_callers_context() -> None:
    marker: contextvars.ContextVar[str] = contextvars.ContextVar("marker", default="none")
    marker.set("session")
    assert list(pipelined([1, 2], lambda _: marker.get(), 1)) == ["session", "session"]


def test_stats_tensor_shapes() -> None:
    stats = BatchStats()
    from rankkit.models.batching import record_mask

    with collecting(stats):
        record_mask(torch.tensor([[1, 1, 0], [1, 0, 0]]))
    assert (stats.tokens, stats.padded_tokens) == (3, 6)
