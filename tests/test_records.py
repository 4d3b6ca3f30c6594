"""podium.records.record behaves as dataclasses.dataclass: each case builds the same class body
both ways and compares what users of the class can see."""

from __future__ import annotations

import copy
import dataclasses
import pickle
from dataclasses import FrozenInstanceError, field
from typing import Any

import pytest

from podium.records import record


def both(body: dict[str, Any], annotations: dict[str, Any], **options: Any) -> tuple[type, type]:
    """The same class made by dataclass and by record."""
    made = []
    for deco in (dataclasses.dataclass, record):
        ns = {"__annotations__": dict(annotations), "__module__": __name__,
              "__qualname__": "Shape", **{k: copy.copy(v) for k, v in body.items()}}
        cls = type("Shape", (), ns)
        made.append(deco(**options)(cls) if options else deco(cls))
    return made[0], made[1]


PLAIN = ({"b": "x", "c": field(default_factory=list)}, {"a": int, "b": str, "c": list})


@pytest.mark.parametrize("frozen", [False, True])
def test_eq_repr_and_hash_match_dataclass(frozen: bool) -> None:
    std, rec = both(*PLAIN, frozen=frozen)
    s1, s2, s3 = std(1), std(1), std(2, "y", [3])
    r1, r2, r3 = rec(1), rec(1), rec(2, "y", [3])
    assert (r1 == r2, r1 == r3, r1 != r3) == (s1 == s2, s1 == s3, s1 != s3) == (True, False, True)
    assert repr(r3) == repr(s3) == "Shape(a=2, b='y', c=[3])"
    assert (r1 == (1, "x", [])) is (s1 == (1, "x", [])) is False  # another class: not equal
    assert r1.__eq__(object()) is NotImplemented
    if frozen:
        std_h, rec_h = both({"b": "x"}, {"a": int, "b": str}, frozen=True)
        assert hash(rec_h(1)) == hash(std_h(1)) == hash((1, "x"))
        assert len({rec_h(1), rec_h(1), rec_h(2)}) == 2
        with pytest.raises(FrozenInstanceError):
            r1.a = 5  # type: ignore[misc]
        with pytest.raises(FrozenInstanceError):
            del r1.a
    else:
        assert rec.__hash__ is None
        assert std.__hash__ is None
        with pytest.raises(TypeError):
            hash(r1)


def test_field_options_decide_what_is_compared_hashed_and_shown() -> None:
    body = {"b": field(default=0, compare=False), "c": field(default=0, repr=False),
            "d": field(default=0, hash=False)}
    std, rec = both(body, {"a": int, "b": int, "c": int, "d": int}, frozen=True)
    for cls in (std, rec):
        assert cls(1, b=1) == cls(1, b=2)  # b is not compared
        assert cls(1, c=1) != cls(1, c=2)
        assert hash(cls(1, d=1)) == hash(cls(1, d=2))  # d is compared but not hashed
        assert repr(cls(1, c=9)) == "Shape(a=1, b=0, d=0)"
    assert hash(rec(1, 2, 3, 4)) == hash(std(1, 2, 3, 4))


def test_what_the_class_writes_itself_is_kept() -> None:
    def own_eq(self: Any, other: Any) -> bool:
        return True

    def own_repr(self: Any) -> str:
        return "mine"

    def own_hash(self: Any) -> int:
        return 7

    # an own __eq__ and no __hash__: a frozen dataclass still hashes its fields
    std, rec = both({"__eq__": own_eq, "__hash__": None}, {"a": int}, frozen=True)
    assert rec(1) == rec(2)
    assert std(1) == std(2)
    assert hash(rec(3)) == hash(std(3)) == hash((3,))
    std, rec = both({"__repr__": own_repr, "__hash__": own_hash}, {"a": int})
    assert repr(rec(1)) == repr(std(1)) == "mine"
    assert hash(rec(1)) == hash(std(1)) == 7  # an explicit __hash__ survives eq=True
    std, rec = both({}, {"a": int}, eq=False, repr=False)
    assert rec(1) != rec(1)
    assert std(1) != std(1)
    assert repr(rec(1)).startswith("<")


def test_a_recursive_value_is_shown_with_an_ellipsis() -> None:
    std, rec = both({"kids": field(default_factory=list)}, {"kids": list})
    for cls in (std, rec):
        node = cls()
        node.kids.append(node)
        assert repr(node) == "Shape(kids=[...])"


def test_the_rest_of_the_dataclass_api_holds() -> None:
    std, rec = both(*PLAIN, frozen=True)
    value = rec(1, "y")
    assert [f.name for f in dataclasses.fields(value)] == ["a", "b", "c"]
    assert dataclasses.replace(value, a=2) == rec(2, "y")
    assert dataclasses.asdict(value) == dataclasses.asdict(std(1, "y")) == {"a": 1, "b": "y", "c": []}
    assert rec.__match_args__ == std.__match_args__ == ("a", "b", "c")
    match value:
        case rec(a, b):  # type: ignore[misc]
            assert (a, b) == (1, "y")
    assert rec.__eq__.__qualname__ == "Shape.__eq__"
    assert rec.__repr__.__qualname__ == "Shape.__repr__"


@record(frozen=True)
class Point:
    """Module level, so pickle can find it."""

    x: int
    y: int = 0


@record(frozen=True)
class Point3(Point):
    z: int = 0


def test_pickle_and_subclasses() -> None:
    assert pickle.loads(pickle.dumps(Point(1, 2))) == Point(1, 2)
    assert Point3(1, 2, 3) == Point3(1, 2, 3) != Point3(1, 2, 4)
    assert Point3(1, 2) != Point(1, 2)  # another class
    assert repr(Point3(1)) == "Point3(x=1, y=0, z=0)"
    assert hash(Point3(1, 2, 3)) == hash((1, 2, 3))


def test_order_goes_to_dataclass() -> None:
    std, rec = both({}, {"a": int, "b": int}, frozen=True, order=True)
    assert sorted([rec(2, 1), rec(1, 5), rec(1, 2)]) == [rec(1, 2), rec(1, 5), rec(2, 1)]
    assert (rec(1, 2) < rec(1, 3)) is (std(1, 2) < std(1, 3)) is True


def test_no_fields() -> None:
    std, rec = both({}, {}, frozen=True)
    assert rec() == rec()
    assert hash(rec()) == hash(std()) == hash(())
    assert repr(rec()) == repr(std()) == "Shape()"


def _fills_dict(cls: type) -> bool:
    """Whether cls's __init__ writes its fields into the instance's __dict__."""
    return "__dict__" in cls.__init__.__code__.co_names


@record(frozen=True)
class Derived:
    """A frozen record with every kind of field __init__ handles."""

    a: int
    items: list[int] = field(default_factory=list)
    total: int = field(init=False, default=0)
    later: list[int] = field(init=False, default_factory=list)
    tag: str = field(default="t", kw_only=True)

    def __post_init__(self) -> None:
        object.__setattr__(self, "total", self.a + len(self.items))


@record(frozen=True)
class DerivedMore(Derived):
    extra: int = 9


def test_a_frozen_records_init_fills_its_dict_and_behaves_as_a_dataclass() -> None:
    assert _fills_dict(Derived)
    assert _fills_dict(DerivedMore)
    assert _fills_dict(Point)
    value = Derived(2, [1, 2], tag="x")
    assert (value.a, value.items, value.total, value.later, value.tag) == (2, [1, 2], 4, [], "x")
    assert value.__dict__ == {"a": 2, "items": [1, 2], "total": 4, "later": [], "tag": "x"}
    assert Derived(1).items is not Derived(1).items  # a new default each time
    assert DerivedMore(1, extra=3) == DerivedMore(1, extra=3) != DerivedMore(1)
    assert dataclasses.replace(value, a=5).total == 7
    assert pickle.loads(pickle.dumps(Point3(1, 2, 3))) == Point3(1, 2, 3)
    assert repr(DerivedMore(1)) == ("DerivedMore(a=1, items=[], total=1, later=[], tag='t', "
                                    "extra=9)")
    with pytest.raises(FrozenInstanceError):
        value.a = 3  # type: ignore[misc]
    with pytest.raises(TypeError):
        Derived()  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        Derived(1, [], "positional")  # type: ignore[misc]
    std, rec = both(*PLAIN, frozen=True)
    assert _fills_dict(rec)
    assert not _fills_dict(std)  # dataclass itself is unchanged
    assert dataclasses.asdict(rec(1, "y")) == dataclasses.asdict(std(1, "y"))


class _Upper:
    """A data descriptor used as a field's default: object.__setattr__ calls its __set__."""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = "_" + name

    def __get__(self, obj: Any, owner: Any = None) -> Any:
        return "D" if obj is None else obj.__dict__[self.name]

    def __set__(self, obj: Any, value: Any) -> None:
        obj.__dict__[self.name] = str(value).upper()


def test_slots_and_descriptor_fields_keep_the_standard_init() -> None:
    @record(frozen=True, slots=True)
    class Slotted:
        a: int
        b: int = 2

    assert not hasattr(Slotted(1), "__dict__")
    assert Slotted(1) == Slotted(1, 2)
    with pytest.raises(FrozenInstanceError):
        Slotted(1).a = 2  # type: ignore[misc]

    @record(frozen=True)
    class Described:
        name: str = _Upper()  # type: ignore[assignment]

    assert not _fills_dict(Described)
    assert Described("abc").name == "ABC"


def test_another_threads_dataclass_is_made_the_standard_way() -> None:
    """While a record is made, the statement writer gives the __dict__ form to that thread
    only: a dataclass another thread makes at the same moment gets the standard one."""
    import threading

    from podium import records

    if not records._FAST_FROZEN_INIT:
        pytest.skip("this Python's dataclasses writes __init__ another way")
    seen: list[str] = []
    with records._FrozenInitIntoDict(True):
        mine = dataclasses._field_assign(True, "x", "x", "self")  # type: ignore[attr-defined]
        other = threading.Thread(target=lambda: seen.append(
            dataclasses._field_assign(True, "x", "x", "self")))  # type: ignore[attr-defined]
        other.start()
        other.join()
    assert mine == "self.__dict__['x']=x"
    assert seen == [records._EXPECTED]
    assert dataclasses._field_assign is records._STANDARD_ASSIGN  # type: ignore[attr-defined]


def test_a_frozen_records_refusals_are_shared_and_refuse_as_dataclass_does() -> None:
    """A frozen record's __setattr__/__delattr__ are closures, not compiled text, and refuse
    what dataclass's refuse: a field, or anything on the class itself; a plain subclass may
    still set and delete an attribute that is not a field."""
    from podium import records

    std, rec = both({"b": "x"}, {"a": int, "b": str}, frozen=True)
    if records._FAST_REFUSALS:
        assert rec.__setattr__.__code__.co_filename == records.__file__
        assert rec.__setattr__.__qualname__ == "Shape.__setattr__"
    assert std.__setattr__.__code__.co_filename != records.__file__  # dataclass unchanged
    for cls in (std, rec):
        value = cls(1)
        for change in (lambda v: setattr(v, "a", 2), lambda v: setattr(v, "other", 2),
                       lambda v: delattr(v, "b")):
            with pytest.raises(FrozenInstanceError) as caught:
                change(value)
            assert str(caught.value).startswith(("cannot assign to field", "cannot delete field"))
        sub = type("Sub", (cls,), {})(1)
        sub.other = 3
        assert sub.other == 3
        del sub.other
        with pytest.raises(FrozenInstanceError, match="cannot assign to field 'a'"):
            sub.a = 2
        with pytest.raises(FrozenInstanceError, match="cannot delete field 'b'"):
            del sub.b
    assert dataclasses._frozen_get_del_attr is records._STANDARD_REFUSALS  # type: ignore[attr-defined]


def test_another_threads_frozen_dataclass_keeps_its_compiled_refusals() -> None:
    """While a record is made, a frozen dataclass another thread makes gets the standard
    compiled __setattr__/__delattr__."""
    import threading

    from podium import records

    if not records._FAST_REFUSALS:
        pytest.skip("this Python's dataclasses writes __setattr__ another way")
    made: list[type] = []

    def other() -> None:
        made.append(dataclasses.dataclass(frozen=True)(type("Other", (), {
            "__annotations__": {"a": int}, "__module__": __name__})))

    with records._FrozenInitIntoDict(False, shared_refusals=True):
        thread = threading.Thread(target=other)
        thread.start()
        thread.join()
    assert made[0].__setattr__.__code__.co_filename != records.__file__
    with pytest.raises(FrozenInstanceError):
        made[0](1).a = 2
