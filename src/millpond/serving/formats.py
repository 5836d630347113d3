"""The model formats millpond's own model server loads: what apply calls servable, and what the server accepts."""

SERVED_FORMATS = ("sklearn", "pytorch")
