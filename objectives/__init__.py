"""What a trial measures: workloads, the aiohttp load generator, metrics and scoring."""
