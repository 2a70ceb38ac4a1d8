"""The sections of the configuration, one module per concept, named for what it configures
(judges, kafka, sampling, the daemon, each scheduled job). The root ``Settings`` that holds
them, checks what spans them and loads them is ``monitor.config.settings``.
"""
