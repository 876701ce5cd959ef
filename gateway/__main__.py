"""``python -m gateway`` is the ``gateway`` command."""

from gateway.cli.main import main

raise SystemExit(main())
