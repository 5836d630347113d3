"""The ``millpond`` command: thin — parses, calls the library, prints."""
