"""Importers of external formats into a study's ledger (e.g. Shallue et al.'s data release)."""
