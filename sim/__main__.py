"""``python -m biasleak.sim``: the same command line as the ``biasleak`` script."""

from biasleak.sim.cli import main

raise SystemExit(main())
