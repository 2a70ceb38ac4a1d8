"""Stream intake for casewatch: sources, decoding, dead-lettering, sampling, offsets."""
