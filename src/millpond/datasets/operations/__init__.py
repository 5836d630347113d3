"""Data operations (DataLoad, DataMigrate, DataProcess, DataBackup) and the dataflows they form.

An applied operation starts at once in a background runner process (as Fluid's controller
would start it), after the operation its ``runAfter`` names has completed; its status —
``phase`` Pending → Executing → Complete | Failed, ``duration``, ``conditions``, progress —
is written to the store, where ``millpond get`` and the Python SDK read it.

The API the CLI and the SDK use, in ``runner`` (this package re-exports nothing: importing any of
its modules runs this file, and ``datasets.status`` reads ``liveness`` while ``runner``'s executors
read ``datasets.status``):

- ``start(kind, name, namespace)``: run an applied operation in the background (returns at once).
- ``run(kind, name, namespace, progress)``: run it here, to its end; returns the final status.
- ``wait(kind, name, namespace, timeout)``: block until it is Complete or Failed; returns the status.
"""
