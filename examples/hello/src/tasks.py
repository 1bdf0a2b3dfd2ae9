"""Python functions for the hello example. Plain functions: no decorator needed."""


def add(a: int, b: int) -> int:
    return a + b


def stats(data: list[float]) -> dict:
    return {"count": len(data), "sum": sum(data), "mean": sum(data) / len(data)}
