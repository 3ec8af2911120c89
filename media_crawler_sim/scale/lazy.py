"""Sequences and maps whose entries are computed when asked for, and a byte-bounded LRU."""
from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from typing import Callable, Generic, Iterator, TypeVar

K = TypeVar("K")
V = TypeVar("V")


class LazySeq(Sequence, Generic[V]):
    """`length` entries, entry i being `make(i)`; a slice is a list of the entries in it."""

    def __init__(self, length: int, make: Callable[[int], V]) -> None:
        self._length, self._make = length, make

    def __len__(self) -> int:
        return self._length

    def __getitem__(self, index):
        if isinstance(index, slice):
            return [self._make(i) for i in range(*index.indices(self._length))]
        if index < 0:
            index += self._length
        if not 0 <= index < self._length:
            raise IndexError(index)
        return self._make(index)


class LazyMap(Mapping, Generic[K, V]):
    """A read-only map: `find(key)` says what a key holds (None: absent), `keys()`
    lists every key lazily, `count` is how many there are."""

    def __init__(self, find: Callable[[K], V | None], keys: Callable[[], Iterator[K]], count: int) -> None:
        self._find, self._keys, self._count = find, keys, count

    def __getitem__(self, key: K) -> V:
        value = self._find(key)
        if value is None:
            raise KeyError(key)
        return value

    def get(self, key, default=None):
        value = self._find(key)
        return default if value is None else value

    def __contains__(self, key) -> bool:
        return self._find(key) is not None

    def __iter__(self) -> Iterator[K]:
        return self._keys()

    def __len__(self) -> int:
        return self._count


class BytesLru:
    """Rendered media, kept while their total stays under `capacity` bytes."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self._entries: OrderedDict[str, bytes] = OrderedDict()
        self._total = 0
        self._lock = threading.Lock()

    def get(self, key: str, make: Callable[[], bytes]) -> bytes:
        with self._lock:
            data = self._entries.get(key)
            if data is not None:
                self._entries.move_to_end(key)
                return data
        data = make()  # outside the lock: rendering the same file twice is only wasted work
        with self._lock:
            if key not in self._entries:
                self._entries[key] = data
                self._total += len(data)
            while self._total > self.capacity and len(self._entries) > 1:
                _, dropped = self._entries.popitem(last=False)
                self._total -= len(dropped)
        return data
