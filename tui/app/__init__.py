"""The Textual app: the race screen, its screens and widgets, and the one module that touches Textual's internals."""
