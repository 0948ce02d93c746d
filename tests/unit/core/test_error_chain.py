"""``chain_of``: an exception and what it was raised from or while handling — the one walk the
traceback filters, the storage's cause finder and its refusal check share."""

from __future__ import annotations

from tuner.core.errors import chain_of


def test_the_chain_follows_cause_before_context_and_ends_at_a_cycle() -> None:
    root, handled, raised = ValueError("root"), KeyError("handled"), RuntimeError("raised")
    handled.__context__ = root
    raised.__cause__ = handled
    raised.__context__ = TypeError("ignored: the explicit cause wins")
    assert chain_of(raised) == [raised, handled, root]
    root.__context__ = raised  # a cycle, as exception handlers can make
    assert chain_of(raised) == [raised, handled, root]
    assert chain_of(root) == [root, raised, handled]
