"""Layer 2, timing: real, virtual and lane clocks, the kernel's socket time stamps, and a clock a person controls."""
