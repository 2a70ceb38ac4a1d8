"""The processing pipeline: one small module per step, all implementing ``ProcessingStep``.

    source → decode → sample → judge → store → commit

See ``base.py`` for the step interface and ``monitor/stream/daemon.py`` for the loop that drives it.
"""
