"""Agent loops: scenarios and how a lane plays them, scenario files and the built-ins, and loop metrics
(where a loop's time went, the Amdahl bound, what a faster model would do)."""
