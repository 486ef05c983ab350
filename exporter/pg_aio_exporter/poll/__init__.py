"""Stage 4, when to read: one worker per target runs the registry's poll collectors every poll
interval and its sample collectors every sample interval, on one connection, and publishes
what they produce to the exposition."""
