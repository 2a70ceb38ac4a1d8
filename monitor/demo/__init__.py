"""Trying casewatch on one machine: ``casewatch demo`` and the local monitoring stack.

Not the daemon (that is ``monitor.stream``): the harness around it. ``run`` orchestrates an
embedded broker, the real daemon, a replay ``producer`` of the ``examples`` and, when the
binaries are installed, a local Prometheus and Alertmanager (``prometheus_stack``, configured by
the pure ``prometheus_config``, each binary supervised by ``prometheus_process``, queried
through ``prometheus_api``) with ``rules/`` loaded. ``options`` is what the demo runs with,
``banner`` what it prints around its run (``severe_turn``: the turn its last line opens);
``summary``, ``alerts`` and ``regression`` are the demo's summary lines, alert watching and
injected canary regression. Tests and benchmarks use the Prometheus stack too.
"""
