"""The ids and states of a large ``run`` or ``wait`` reply, read without building its JSON objects.

A reply listing 10 000 task states is over a megabyte of JSON, and ``json.loads`` of it costs more than the
rest of a graph's submission together. What a future needs at once is much less: the task ids (to wait
for them) and whether every task completed. Both are read off the bytes. In JSON text a bare ``"`` never
occurs inside a string (it is escaped there), so in a successful reply (``{"ok":true,"tasks":[...]...}``,
compact as canopyd writes it) ``"id":`` is the member of a TASKSTATE object, whose sole ``id`` is the
task's: inside a string each ``"`` is escaped, so the text ``"id":`` can only be a key, and no other object
of the reply has that key. Likewise ``"state":"completed"`` is a task's state. Any other reply, or a count
that does not match, falls back to parsing the whole reply.
"""

from __future__ import annotations

import re

OK_TASKS = b'{"ok":true,"tasks":['
# A pattern that starts with a literal runs a fast substring search; one that starts with a character class
# ([{,]"id") steps byte by byte, about seven times slower.
_ID = re.compile(rb'"id":(\d+)')


def task_ids(body: bytes, count: int) -> list[int] | None:
    """The ids of the ``count`` tasks of a successful reply listing tasks, in order; None if not one."""
    if not body.startswith(OK_TASKS):
        return None
    ids = _ID.findall(body)
    if len(ids) != count:
        return None
    return list(map(int, ids))


def count_state(body: bytes, state: str) -> int:
    """How many task states of a successful reply listing tasks are ``state``."""
    return body.count(b'"state":"' + state.encode() + b'"')


def has_state(body: bytes, state: str) -> bool:
    """Whether a task state of a successful reply listing tasks is ``state``: a search that stops at the
    first."""
    return b'"state":"' + state.encode() + b'"' in body
