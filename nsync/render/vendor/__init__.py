"""plotly.js, vendored (README.md): data only."""
