"""Katib's metrics collectors: what a trial printed or wrote, read as Katib's observation logs."""
