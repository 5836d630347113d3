"""How ``millpond get`` lays tables out; kept for the commands that print their own (``queue``, ``ps``).

The layout lives on the floor (``millpond.tables``) and Fluid's columns beside its kinds
(``datasets.printer_columns``): every kind's handler builds its own rows.
"""

from __future__ import annotations

from millpond.datasets.printer_columns import COLUMNS, MISSING, row
from millpond.tables import format_table, human_age

__all__ = ["COLUMNS", "MISSING", "format_table", "human_age", "row"]
