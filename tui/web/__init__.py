"""The server behind ``tokrace web``: the race screen in a browser tab."""
