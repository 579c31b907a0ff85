"""Real agent traces (docs/design.md §12): one reader per format turning a file into the trace model, the analysis of
where a trace's time went, re-timing on another tier, and the comparison of trace sets."""
