"""``python -m roarsearch``: the same program as the ``roarsearch`` script."""

from roarsearch.cli.main import main

raise SystemExit(main())
