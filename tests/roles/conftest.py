"""Fixtures of the daemon tests; the helpers live in roles_stack.py (a unique module name, so
no other suite's conftest can shadow them)."""

from roles_stack import collecting, dev, runner  # noqa: F401  (fixtures)
