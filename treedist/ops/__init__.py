"""Operations: one status snapshot of a deployment (links, lag, rates, clusters, jobs) and
what is served from it: `treedist status`, the Prometheus metrics and the web view."""
