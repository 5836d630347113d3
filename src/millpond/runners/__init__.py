"""Where one task's process runs: the local runner, its sandbox and its Python environments.

Runners know processes, not pipelines: the engine hands them a ProcessSpec.
"""
