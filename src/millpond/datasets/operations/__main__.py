"""``python -m millpond.datasets.operations KIND NAME [NAMESPACE]``: run one operation (what ``start`` spawns).

The runner records itself first, so ``millpond ps`` lists it for as long as it runs.
"""

import sys

from millpond.datasets.operations.processes import register_runner
from millpond.datasets.operations.runner import main

if len(sys.argv) > 2:
    register_runner(sys.argv[1], sys.argv[2], sys.argv[3] if len(sys.argv) > 3 else "default")
raise SystemExit(main())
