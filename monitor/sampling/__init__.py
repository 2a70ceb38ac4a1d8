"""Which turns get judged, and what judging may cost: the sampler (``sampler``) and the hourly
judge budget it shares with the scheduled jobs (``budget``). Pure decisions over the injected
clock, apart from any intake."""
