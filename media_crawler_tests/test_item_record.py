"""models.item_record: a frozen dataclass whose __init__ stores the fields in one go (issue 31)."""
import dataclasses
import pickle

import pytest

from media_crawler.models import item_record


@item_record
class _Record:
    name: str
    size: int = 0
    at: float = dataclasses.field(default_factory=lambda: 1.5)
    body: bytes | None = dataclasses.field(default=None, repr=False, compare=False)


def test_an_item_record_is_the_frozen_dataclass_it_stands_for():
    record = _Record("a")
    assert (record.name, record.size, record.at, record.body) == ("a", 0, 1.5, None)
    assert record == _Record("a", 0, 1.5, b"other body") and hash(record) == hash(_Record("a"))
    assert repr(record) == "_Record(name='a', size=0, at=1.5)"
    assert dataclasses.replace(record, size=3) == _Record("a", 3) and _Record("a", at=2.0).at == 2.0
    assert dataclasses.asdict(record) == {"name": "a", "size": 0, "at": 1.5, "body": None}
    assert pickle.loads(pickle.dumps(record)) == record
    with pytest.raises(dataclasses.FrozenInstanceError):
        record.size = 1  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        del record.name
    with pytest.raises(TypeError):
        _Record()  # type: ignore[call-arg]


def test_a_record_with_more_than_plain_fields_is_refused():
    with pytest.raises(TypeError):
        @item_record
        class _Checked:
            name: str

            def __post_init__(self) -> None:
                pass

    with pytest.raises(TypeError):
        @item_record
        class _KeywordOnly:
            name: str = dataclasses.field(kw_only=True)
