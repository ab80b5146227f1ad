"""``python -m mixgcn`` — the same as the ``mixgcn`` console script."""

from mixgcn.host.cli import main

raise SystemExit(main())
