from study.cli import entry

entry()
