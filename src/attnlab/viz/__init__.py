"""Pictures of attention: heatmaps, the positional encoding, an offline HTML viewer, one report.
Every picture reads an :class:`attnlab.inspect.Capture`."""
