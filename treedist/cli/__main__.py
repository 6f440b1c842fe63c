"""`python -m treedist.cli ...` (how `treedist local up` starts registries with this interpreter)."""

from treedist.cli import main

main()
