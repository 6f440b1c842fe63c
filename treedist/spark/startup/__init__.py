"""Start-up hooks of the Python processes Spark starts (see sitecustomize)."""
