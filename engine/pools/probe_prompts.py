"""Prompts that probe a pool: output-contract tests and the engine benchmark.

Written for this project, so they are held out from the tiny pair's training
text (the Python standard library and `pydoc_data`) by construction, while
staying in its domains: Python code and English technical prose.
"""

CODE_PROMPTS: tuple[str, ...] = (
    'def moving_average(values, window):\n    """Return the moving average of values."""\n',
    "class RateLimiter:\n    def __init__(self, rate, burst):\n        self.rate = rate\n",
    "import os\nimport sys\n\n\ndef main(argv=None):\n    if argv is None:\n",
    "def parse_header(line):\n    name, _, value = line.partition(':')\n    return ",
    "    for index, item in enumerate(items):\n        if item is None:\n            ",
    "def read_config(path):\n    with open(path, encoding='utf-8') as f:\n        ",
    "class Node:\n    def __init__(self, key, left=None, right=None):\n        ",
    "    try:\n        result = compute(value)\n    except ValueError as exc:\n",
    "def flatten(nested):\n    result = []\n    for item in nested:\n        if isinstance(",
    "    def __repr__(self):\n        return '%s(%r)' % (self.__class__.__name__, ",
    "def merge_sorted(left, right):\n    i = j = 0\n    merged = []\n    while ",
    "if __name__ == '__main__':\n    import argparse\n    parser = argparse.ArgumentParser(",
)

PROSE_PROMPTS: tuple[str, ...] = (
    "The function returns a new list containing the items of the original sequence",
    "This module provides a simple way to read and write files in a format that",
    "When the argument is omitted, the default value is used, which means that",
    "An exception is raised if the object does not support the operation, so the caller",
    "The following example shows how to create a dictionary and iterate over its",
    "In this tutorial we describe the basic concepts of the language and explain",
    "Each thread has its own stack, but all threads in a process share the same",
    "A string is a sequence of characters; it can be indexed and sliced like",
    "The interpreter reads the statements one at a time and executes them in",
    "Note that the order of the keys is the order in which they were inserted, and",
    "If the file does not exist, the open call fails and an error is reported to",
    "Numbers can be compared with the usual operators, and the result of a comparison is",
)


def mixed_prompts(count: int) -> list[str]:
    """Alternate code and prose prompts, so any prefix covers both domains."""
    pairs = [p for pair in zip(CODE_PROMPTS, PROSE_PROMPTS, strict=True) for p in pair]
    assert count <= len(pairs), f"only {len(pairs)} probe prompts"
    return pairs[:count]
