import module_that_does_not_exist_anywhere  # noqa: F401


def fn():
    return 1
