"""Layer 7, real agent traces (docs/design.md §12): one reader per format turning a file into the trace model,
where a trace's time went, re-timing on another tier, and the comparison of trace sets."""
