"""The download stage's hand-out order: largest first, but while small files remain at
most half the workers hold a large one (disk-bound and CPU-bound work overlap); once
the small files are gone, the large ones go out freely."""
from __future__ import annotations

from types import SimpleNamespace

from media_crawler.pipeline.scheduling import LARGE_FILE_BYTES, SizeAwareOrder

MB = 1024 * 1024


def tasks(*sizes_mb):
    return [SimpleNamespace(id=n, expected_size=None if size is None else int(size * MB))
            for n, size in enumerate(sizes_mb)]


def size_of(task):
    return round(task.expected_size / MB, 2) if task.expected_size is not None else None


def test_largest_first_with_at_most_half_the_workers_on_large_files():
    order = SizeAwareOrder(tasks(40, 0.5, 30, 20, 0.2, 10, 1, 0.3), workers=4)
    handed = iter(order)
    first = [next(handed) for _ in range(4)]
    assert [size_of(task) for task in first] == [40, 30, 1, 0.5]  # two large (the cap), then the largest small

    order.finished(first[2])  # a small one ends: the large share is still full
    assert size_of(next(handed)) == 0.3
    order.finished(first[0])  # a large one ends: the next large may go
    assert size_of(next(handed)) == 20


def test_when_the_small_files_are_gone_the_large_ones_go_out_freely():
    order = SizeAwareOrder(tasks(40, 30, 20, 0.5), workers=4)
    assert [size_of(task) for task in order] == [40, 30, 0.5, 20]


def test_every_task_is_handed_out_exactly_once_whatever_the_mix():
    mixed = tasks(*[9, None, 0.1, 12, 8, 3, None, 50, 0.01] * 5)
    order = SizeAwareOrder(mixed, workers=3)
    handed = []
    for task in order:
        handed.append(task)
        order.finished(task)
    assert sorted(task.id for task in handed) == sorted(task.id for task in mixed)


def test_unknown_sizes_count_as_small_and_one_worker_still_gets_a_large_file():
    order = SizeAwareOrder(tasks(None, LARGE_FILE_BYTES / MB, 0.5), workers=1)
    handed = iter(order)
    assert size_of(next(handed)) == LARGE_FILE_BYTES / MB  # the cap is at least one
    assert size_of(next(handed)) == 0.5
    assert next(handed).expected_size is None
