"""What the commands print and the files they read and write, over ``monitor.stats``.

Views and reports (``turn_view`` for ``casewatch inspect``, ``pairwise_report``,
``panel_report``, ``tournament_plot``, ``judge_change``), labelling files (``label_files``), the
judge canary's set and runs (``judge_canary``), TREC qrels and runs (``trec``, ``rubric_runs``)
and the alert rules' links (``alert_links``).
"""
