"""The processing pipeline: one small module per step, all implementing ``ProcessingStep``.

    source → decode → sample → lookup → judge → store → commit

See ``base.py`` for the step interface, ``rebalance.py`` for what a revoke asks of the steps
holding turns, and ``monitor/stream/daemon.py`` for the loop that drives it.
"""
