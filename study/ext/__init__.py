"""The extensions that ship with ``study``: one package each, registered with the core through
`study.extension` (the core imports none of them)."""
