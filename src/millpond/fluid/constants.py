"""The names Fluid's Python SDK defines in ``fluid.constants``, with the same values.

Notebooks written for Fluid refer to ``constants.JUICEFS_RUNTIME_KIND`` or
``constants.DATA_MIGRATE_DIRECTION_FROM``; these must mean the same here.
"""

from __future__ import annotations

from millpond.datasets.kinds import API_VERSION, GROUP  # noqa: F401 - Fluid's constants has both

VERSION = API_VERSION.rpartition("/")[2]

# Seconds, as in Fluid: how long a wait polls, and how often.
DEFAULT_API_REQUEST_TIMEOUT = 300
DEFAULT_POLL_TIMEOUT = 600
DEFAULT_POLL_INTERVAL = 3
DEFAULT_DATAFLOW_TIME_TO_LIVE = 86400 * 3

DATASET_KIND = "Dataset"
DATASET_PLURAL = "datasets"

ALLUXIO_RUNTIME_KIND = "AlluxioRuntime"
ALLUXIO_RUNTIME_PLURAL = "alluxioruntimes"
JINDO_RUNTIME_KIND = "JindoRuntime"
JINDO_RUNTIME_PLURAL = "jindoruntimes"
JUICEFS_RUNTIME_KIND = "JuiceFSRuntime"
JUICEFS_RUNTIME_PLURAL = "juicefsruntimes"
EFC_RUNTIME_KIND = "EFCRuntime"
EFC_RUNTIME_PLURAL = "efcruntimes"
THIN_RUNTIME_KIND = "ThinRuntime"
THIN_RUNTIME_PLURAL = "thinruntimes"
VINEYARD_RUNTIME_KIND = "VineyardRuntime"
VINEYARD_RUNTIME_PLURAL = "vineyardruntimes"

DATA_LOAD_KIND = "DataLoad"
DATA_LOAD_PLURAL = "dataloads"
DATA_MIGRATE_KIND = "DataMigrate"
DATA_MIGRATE_PLURAL = "datamigrates"
DATA_PROCESS_KIND = "DataProcess"
DATA_PROCESS_PLURAL = "dataprocesses"

DATA_MIGRATE_DIRECTION_FROM = "from"
DATA_MIGRATE_DIRECTION_TO = "to"

# The label Fluid's SDK puts on every step of a dataflow run (value: the run id).
DATAFLOW_LABEL = "fluid.io/dataflow"
