"""``python -m millpond.datasets.operations KIND NAME [NAMESPACE]``: run one operation (what ``start`` spawns)."""

from millpond.datasets.operations.runner import main

raise SystemExit(main())
