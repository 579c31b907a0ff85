"""tokrace's colour themes: the built-in theme files (``builtin/*.toml``) and the loader that validates them
and turns them into Textual themes (``themes.loader``)."""
