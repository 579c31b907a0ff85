"""``tokrace serve``: a latency-faithful loopback server speaking the three protocols, and its wire writers."""
