"""Test and benchmark fixtures that ship with the package (used by tests/ and bench/)."""
