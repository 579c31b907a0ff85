"""The command line: one module per command, argument checks, terminal tables and errors. Never imports Textual."""
