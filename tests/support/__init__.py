"""Helpers the tests of several folders share (``from support.hardening import run_child``).

Importable as ``support``: pytest puts the folder of the root ``conftest.py`` (``tests/``) on
``sys.path`` before it collects a test, and ``scripts/test.sh`` runs pytest from there.
"""
