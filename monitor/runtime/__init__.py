"""What a casewatch process runs on: the injected clock, worker threads, child processes,
the allocator's arenas, logging, and how the program names itself in printed commands."""
