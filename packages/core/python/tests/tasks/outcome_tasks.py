"""Tasks whose outcome is unusual: exceptions that fail to describe themselves, and the like."""


class UnprintableError(Exception):
    """An exception whose ``str()`` itself raises (a buggy ``__str__``, or one reading state that is gone)."""

    def __str__(self) -> str:
        raise RuntimeError("__str__ is broken")


def unprintable() -> None:
    raise UnprintableError("lost")


def add(a: int, b: int) -> int:
    return a + b


def print_huge_line(mib: int) -> str:
    """One write of ``mib`` MiB of text: more than one frame's header may hold (64 MiB) as one message."""
    import sys

    sys.stdout.write("y" * (mib << 20) + "\n")
    return "done"


def nested(depth: int) -> list:
    """A list nested ``depth`` levels deep (a parse tree, a linked structure)."""
    value: list = []
    for _ in range(depth):
        value = [value]
    return value


def yield_nested(depth: int):
    yield 1
    yield nested(depth)


class ExitsWhenPickled:
    """A value whose pickling raises ``SystemExit`` (a ``BaseException``, not an ``Exception``): a
    library's ``__reduce__`` calling ``sys.exit`` on a state it cannot save, or the like."""

    def __reduce__(self):  # type: ignore[no-untyped-def]
        raise SystemExit("cannot pickle me")


def exits_when_pickled() -> ExitsWhenPickled:
    return ExitsWhenPickled()


def yield_exits_when_pickled():
    yield 1
    yield ExitsWhenPickled()
