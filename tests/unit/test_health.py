"""``core.health``: pending graph changes, the backlog's ETA and the health verdict.

These are the rules ``kgrag status`` and the query service's ``/healthz`` share, checked on
plain values (a fixed ``now``, hand-made job statuses), so no clock, file or broker is needed.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from core.health import (
    assess,
    describe_failed,
    describe_job,
    eta,
    format_duration,
    partition_of,
    pending_changes,
    stale_reason,
)
from core.job_status import HEARTBEAT_S, FailedItem, JobStatus

NOW = 1_800_000_000.0


def job(**changes: object) -> JobStatus:
    base = JobStatus(state="waiting", pid=42, started_at=NOW - 3600, updated_at=NOW - 1)
    return replace(base, **changes)  # type: ignore[arg-type]


def refused(n: int) -> tuple[FailedItem, ...]:
    return tuple(
        FailedItem(
            kind="report",
            item=f"c{i}",
            reason="HTTP 400: content filter",
            attempts=2,
            first_failed_at=NOW - 600,
            next_retry_at=NOW + 30 * (i + 1),
        )
        for i in range(n)
    )


class TestPendingChanges:
    def test_end_offsets_beyond_the_consumed_ones_are_summed(self) -> None:
        assert pending_changes({0: 10, 1: 7, 2: 0}, {"0": 4, "1": 7}) == 6

    def test_a_partition_the_snapshot_never_read_counts_from_zero(self) -> None:
        assert pending_changes({0: 10, 1: 5}, {"0": 10}) == 5

    def test_before_the_first_snapshot_everything_pends(self) -> None:
        assert pending_changes({0: 3, 1: 4}, None) == 7
        assert pending_changes({0: 3, 1: 4}, {}) == 7

    def test_never_negative_per_partition(self) -> None:
        # a snapshot that read further than the (cached) end offsets says: nothing pending
        assert pending_changes({0: 5, 1: 9}, {"0": 8, "1": 2}) == 7

    def test_keys_with_a_topic_prefix_and_junk_keys(self) -> None:
        consumed = {"ns.graph-changes:0": 41, "graph-changes:1": 7, "weird": 99}
        assert pending_changes({0: 50, 1: 7}, consumed) == 9

    @pytest.mark.parametrize(
        ("key", "partition"), [("3", 3), (3, 3), ("topic:12", 12), ("t:x", None), ("", None)]
    )
    def test_partition_of(self, key: str | int, partition: int | None) -> None:
        assert partition_of(key) == partition


class TestEta:
    def test_drain_rate_and_time_left(self) -> None:
        e = eta(100, 80, 2.0)
        assert e.pending == 80 and e.drained_per_s == 10.0 and e.seconds == 8.0

    @pytest.mark.parametrize(("first", "second"), [(80, 80), (80, 95)])
    def test_unknown_when_the_backlog_did_not_shrink(self, first: int, second: int) -> None:
        e = eta(first, second, 2.0)
        assert e.seconds is None and e.drained_per_s is None and e.pending == second

    def test_unknown_without_a_second_sample(self) -> None:
        assert eta(50, 50, 0.0).seconds is None

    def test_zero_when_nothing_pends(self) -> None:
        assert eta(0, 0, 2.0).seconds == 0.0
        drained = eta(6, 0, 2.0)
        assert drained.seconds == 0.0 and drained.drained_per_s == 3.0


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(None, "unknown"), (-3, "0 s"), (45.4, "45 s"), (600, "10 min"), (9000, "2.5 h"),
     (3 * 86400, "3.0 d")],
)  # fmt: skip
def test_format_duration(seconds: float | None, text: str) -> None:
    assert format_duration(seconds) == text


class TestDescribeJob:
    def test_no_status_file_says_what_to_run(self) -> None:
        assert "kgrag worker" in describe_job(None, NOW)

    def test_silent_job_says_for_how_long(self) -> None:
        quiet = job(updated_at=NOW - 45)
        assert 3 * HEARTBEAT_S < 45  # past the heartbeat limit
        assert describe_job(quiet, NOW) == "community job not heard from for 45 s"

    def test_live_job_with_buffered_changes_and_an_error(self) -> None:
        text = describe_job(job(state="running", pending_changes=12, last_error="boom"), NOW)
        assert text == (
            "community job is running with 12 change(s) buffered; community job last error: boom"
        )

    def test_stopped_job(self) -> None:
        assert describe_job(job(state="stopped", updated_at=NOW - 10), NOW).startswith(
            "community job stopped 10 s ago"
        )

    def test_failed_items_quote_the_first_reasons_and_retry_times(self) -> None:
        text = describe_failed(job(failed_items_total=7, failed_items=refused(5)), NOW)
        assert text.startswith("7 report(s)/summary(ies) refused by the LLM, retrying: ")
        assert "report c0: HTTP 400: content filter (retry in 30 s)" in text
        assert "c2" in text and "c3" not in text  # only the first few are quoted


class TestStaleness:
    def stale(self, **kw: object) -> str | None:
        args: dict[str, object] = {
            "pending": 5,
            "snapshot_version": 9,
            "snapshot_age_s": 600.0,
            "stale_after_s": 300.0,
            "job": job(updated_at=NOW - 45),
            "now": NOW,
        }
        args.update(kw)
        return stale_reason(**args)  # type: ignore[arg-type]

    def test_pending_changes_and_an_old_version_are_stale(self) -> None:
        assert self.stale() == (
            "5 graph change(s) pending and the newest version (v9) is 10 min old "
            "(stale after 5 min); community job not heard from for 45 s"
        )

    @pytest.mark.parametrize("kw", [{"pending": 0}, {"pending": None}, {"snapshot_age_s": 120.0}])
    def test_not_stale(self, kw: dict[str, object]) -> None:
        assert self.stale(**kw) is None

    def test_before_the_first_version_only_a_missing_job_is_stale(self) -> None:
        assert self.stale(snapshot_age_s=None, snapshot_version=None, job=job()) is None
        text = self.stale(snapshot_age_s=None, snapshot_version=None, job=None)
        assert text is not None and text.startswith("5 graph change(s) pending and no version")


class TestAssess:
    def verdict(self, **kw: object) -> tuple[str, tuple[str, ...]]:
        args: dict[str, object] = {
            "snapshot_version": 3,
            "snapshot_age_s": 10.0,
            "pending": 0,
            "stale_after_s": 300.0,
            "job": job(),
            "now": NOW,
        }
        args.update(kw)
        h = assess(**args)  # type: ignore[arg-type]
        assert h.to_json() == {"status": h.status, "reasons": list(h.reasons)}
        return h.status, h.reasons

    def test_ok(self) -> None:
        assert self.verdict() == ("ok", ())

    def test_each_problem_is_one_reason(self) -> None:
        status, reasons = self.verdict(
            snapshot_age_s=900.0,
            pending=4,
            job=job(updated_at=NOW - 60, failed_items_total=3, failed_items=refused(3)),
            unreachable=["Weaviate is not reachable: refused"],
        )
        assert status == "degraded" and len(reasons) == 3
        assert reasons[0] == "Weaviate is not reachable: refused"
        assert "4 graph change(s) pending" in reasons[1] and "15 min old" in reasons[1]
        assert "not heard from for 60 s" in reasons[1]
        assert reasons[2].startswith("3 report(s)/summary(ies) refused by the LLM, retrying")

    def test_no_snapshot_still_lists_reasons(self) -> None:
        status, reasons = self.verdict(
            snapshot_version=None, snapshot_age_s=None, pending=2, job=None
        )
        assert status == "no_snapshot" and len(reasons) == 1

    def test_a_dead_job_with_nothing_to_do_is_not_degraded(self) -> None:
        assert self.verdict(job=job(updated_at=NOW - 3600))[0] == "ok"
