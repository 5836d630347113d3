"""A container task's launch as an ordered list of small policies (``order.TASK_POLICIES``).

Each policy is one module with one call, ``prepare(launch, run) -> Proceed | Done | Fail | Submit``:
it reads the task being launched (``launch.TaskLaunch``) and the run around it
(``launch.RunContext``), adds what it owns to the launch (a resource request, a retry policy, a
cache key, mounts, a time limit, a queue workload), and says whether the launch goes on, ends
here (``Done``: reused, built in, a cache hit), fails, or is handed to a worker as it stands
(``Submit``: an importer). The engine applies them in order and acts on the verdict; a new
concern (running the task in its container image) is one more module in the list.
"""
