"""`record`: the standard library's dataclass, built for a fast start.

`@dataclass` compiles every method it writes with `exec`: `__init__`, `__repr__` and `__eq__`,
and for a frozen class `__hash__`, `__setattr__` and `__delattr__` too. That is 0.4 ms for a
plain class and 0.8 ms for a frozen one on the 2-CPU machine, and a cold `podium run` defines
about 75 of them before it does anything (docs/decisions/0037-records.md).

`record` takes the same arguments and returns the same dataclass: `fields()`, `replace()`,
`asdict()`, pattern matching, pickling and mypy (through `dataclass_transform`) see no
difference. Only `__init__` is still compiled; `__eq__`, `__hash__` and `__repr__` are
shared functions that read the fields through an `operator.attrgetter` made once per class,
and a frozen class's `__setattr__`/`__delattr__` are closures over its field names. They
behave as the generated ones do: the same fields compared, hashed and shown, `NotImplemented`
for another class, a recursive repr shown as `...`, a method the class writes itself kept, a
class with `__eq__` but no frozen `__hash__` unhashable, and a field of a frozen class
neither set nor deleted. `order=True` (whose four comparisons are not worth sharing for
the one class that asks) goes to `dataclass` as it is. A frozen record's `__init__` writes
its fields into the instance's `__dict__` rather than through `object.__setattr__` (below).
"""

from __future__ import annotations

import _thread
import dataclasses
import reprlib
from collections.abc import Callable
from operator import attrgetter
from typing import Any, TypeVar, dataclass_transform, overload

T = TypeVar("T", bound=type)


@overload
def record(cls: T, /) -> T: ...


@overload
def record(*, frozen: bool = False, eq: bool = True, repr: bool = True,
           order: bool = False, kw_only: bool = False, slots: bool = False) -> Callable[[T], T]: ...


@dataclass_transform(field_specifiers=(dataclasses.field, dataclasses.Field))
def record(cls: Any = None, /, *, frozen: bool = False, eq: bool = True, repr: bool = True,
           order: bool = False, kw_only: bool = False, slots: bool = False) -> Any:
    """`@record` or `@record(frozen=True, ...)`: see the module's docstring."""

    def wrap(c: Any) -> Any:
        if order:
            return dataclasses.dataclass(c, frozen=frozen, eq=eq, repr=repr, order=True,
                                         kw_only=kw_only, slots=slots)
        # what dataclass decides about __hash__ from the class body, before it is changed
        own = c.__dict__
        explicit_hash = "__hash__" in own and not (own["__hash__"] is None and "__eq__" in own)
        with _FrozenInitIntoDict(frozen and not slots and _plain_fields(c),
                                 shared_refusals=frozen and not slots):
            c = dataclasses.dataclass(c, frozen=frozen, eq=False, repr=False,
                                      kw_only=kw_only, slots=slots)
        _share_methods(c, frozen=frozen, eq=eq, repr=repr, explicit_hash=explicit_hash)
        return c

    return wrap if cls is None else wrap(cls)


def _getter(names: list[str]) -> Callable[[Any], tuple[Any, ...]]:
    """A function from an instance to the tuple of these fields' values."""
    if not names:
        return lambda self: ()
    if len(names) == 1:
        one = attrgetter(names[0])
        return lambda self: (one(self),)
    return attrgetter(*names)  # a tuple for two names or more


def _put(cls: Any, name: str, fn: Callable[..., Any]) -> None:
    fn.__qualname__ = f"{cls.__qualname__}.{name}"
    setattr(cls, name, fn)


def _share_methods(cls: Any, *, frozen: bool, eq: bool, repr: bool,
                   explicit_hash: bool) -> None:
    fields = dataclasses.fields(cls)
    own = cls.__dict__
    if repr and "__repr__" not in own:
        shown = [f.name for f in fields if f.repr]

        @reprlib.recursive_repr()
        def __repr__(self: Any) -> str:
            inner = ", ".join(f"{name}={getattr(self, name)!r}" for name in shown)
            return f"{self.__class__.__qualname__}({inner})"

        _put(cls, "__repr__", __repr__)
    if not eq:
        return
    if "__eq__" not in own:
        compared = _getter([f.name for f in fields if f.compare])

        def __eq__(self: Any, other: Any) -> Any:
            if other.__class__ is self.__class__:
                return compared(self) == compared(other)
            return NotImplemented

        _put(cls, "__eq__", __eq__)
    if explicit_hash:
        return
    if frozen:
        hashed = _getter([f.name for f in fields
                          if (f.compare if f.hash is None else f.hash)])

        def __hash__(self: Any) -> int:
            return hash(hashed(self))

        _put(cls, "__hash__", __hash__)
    else:
        cls.__hash__ = None  # eq without frozen: unhashable, as dataclass makes it


# A frozen dataclass's __init__ sets each field with `object.__setattr__(self, name, value)`
# (its own __setattr__ refuses): a call through a method wrapper per field, 2.9 µs for seven
# fields against 0.6 µs when the values go into the instance's __dict__, which is all
# object.__setattr__ does for a field of a class with a __dict__ unless the field is a data
# descriptor (`_plain_fields` checks). The statement comes from one function,
# dataclasses._field_assign; while a record is made it writes the __dict__ form, for this
# thread only, and only if that function is there and writes what this module expects
# (another Python keeps the standard __init__).
_STANDARD_ASSIGN: Callable[[bool, str, str, str], str] | None = getattr(
    dataclasses, "_field_assign", None)
_EXPECTED = "__dataclass_builtins_object__.__setattr__(self,'x',x)"
_making = _thread.RLock()
_maker: list[int | None] = [None]  # the thread making a record with the __dict__ __init__


def _dict_assign(frozen: bool, name: str, value: str, self_name: str) -> str:
    if frozen and _maker[0] == _thread.get_ident():
        return f"{self_name}.__dict__[{name!r}]={value}"
    assert _STANDARD_ASSIGN is not None  # installed only where it exists
    return _STANDARD_ASSIGN(frozen, name, value, self_name)


def _plain_fields(cls: Any) -> bool:
    """Whether instances have a __dict__ and no field is a data descriptor (whose __set__
    object.__setattr__ calls, and a write into the __dict__ would skip)."""
    if cls.__dictoffset__ == 0:
        return False
    # (not inspect.get_annotations: inspect is heavy to import, and records load at start-up)
    names = {n for klass in cls.__mro__
             for n in klass.__dict__.get("__annotations__", {})}  # noqa: RUF063
    for name in names:
        for klass in cls.__mro__:
            if name in klass.__dict__:
                value = klass.__dict__[name]
                if isinstance(value, dataclasses.Field):
                    value = value.default
                if hasattr(type(value), "__set__") or hasattr(type(value), "__delete__"):
                    return False
                break
    return True


def _fast_frozen_init() -> bool:
    try:
        return _STANDARD_ASSIGN is not None and \
            _STANDARD_ASSIGN(True, "x", "x", "self") == _EXPECTED
    except Exception:  # another signature: the standard __init__
        return False


_FAST_FROZEN_INIT = _fast_frozen_init()


# A frozen dataclass's __setattr__ and __delattr__ refuse a change to a field (or any change
# on the class itself) and pass the rest to the base class: two more compilations per frozen
# class, from dataclasses._frozen_get_del_attr(cls, fields, globals). While a frozen record is
# made, that function gives closures doing the same, to the thread making it only, and only
# on a Python whose function takes those arguments (checked once at import).
_STANDARD_REFUSALS: Callable[..., tuple[Any, Any]] | None = getattr(
    dataclasses, "_frozen_get_del_attr", None)


def _shared_refusals(cls: Any, fields: list[dataclasses.Field[Any]], globals: Any) -> Any:
    if _maker[0] != _thread.get_ident():
        assert _STANDARD_REFUSALS is not None  # installed only where it exists
        return _STANDARD_REFUSALS(cls, fields, globals)
    names = tuple(f.name for f in fields)
    refused = dataclasses.FrozenInstanceError

    def __setattr__(self: Any, name: str, value: Any) -> None:
        if type(self) is cls or name in names:
            raise refused(f"cannot assign to field {name!r}")
        super(cls, self).__setattr__(name, value)

    def __delattr__(self: Any, name: str) -> None:
        if type(self) is cls or name in names:
            raise refused(f"cannot delete field {name!r}")
        super(cls, self).__delattr__(name)

    for fn in (__setattr__, __delattr__):
        fn.__qualname__ = f"{cls.__qualname__}.{fn.__name__}"
    return __setattr__, __delattr__


def _fast_refusals() -> bool:
    code = getattr(_STANDARD_REFUSALS, "__code__", None)
    return code is not None and code.co_argcount == 3 and \
        code.co_varnames[:3] == ("cls", "fields", "globals")


_FAST_REFUSALS = _fast_refusals()


class _FrozenInitIntoDict:
    """While a frozen record is made: its __init__ fills the __dict__ (when it has one and
    `on`), and its __setattr__/__delattr__ are closures (when `shared_refusals`)."""

    __slots__ = ("on", "refusals")

    def __init__(self, on: bool, *, shared_refusals: bool = False) -> None:
        self.on = on and _FAST_FROZEN_INIT
        self.refusals = shared_refusals and _FAST_REFUSALS

    def __enter__(self) -> None:
        if self.on or self.refusals:
            _making.acquire()
            _maker[0] = _thread.get_ident()
        if self.on:
            dataclasses._field_assign = _dict_assign  # type: ignore[attr-defined]
        if self.refusals:
            dataclasses._frozen_get_del_attr = _shared_refusals  # type: ignore[attr-defined]

    def __exit__(self, *exc: object) -> None:
        if self.refusals:
            dataclasses._frozen_get_del_attr = _STANDARD_REFUSALS  # type: ignore[attr-defined]
        if self.on:
            dataclasses._field_assign = _STANDARD_ASSIGN  # type: ignore[attr-defined]
        if self.on or self.refusals:
            _maker[0] = None
            _making.release()
