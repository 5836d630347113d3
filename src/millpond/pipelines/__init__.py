"""KFP v2 pipelines: load and validate IR, resolve values, and run the DAG."""
