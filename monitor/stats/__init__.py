"""Pure statistics: no I/O, no judges, no rendering; numbers in, numbers out.

Paired tests and rank correlations over conversations (``paired``, ``comparison``,
``agreement``); the two-window drift tests (``drift_stats``, ``drift``); sequential detection
(``detection``, the Bernoulli CUSUM grid, its calibration ``cusum_calibration``, the baseline it
watches against ``baseline_policy``, what it watches ``detection_signals`` and its stored form
``detector_state``); the judge's rate corrected by human labels (``ppi``,
``confidence_sequence``) and where labels teach most (``active_sampling``); Elo,
Bradley-Terry and Swiss tournaments (``elo``, ``bradley_terry``, ``tournament``). scipy is
imported on first use (``lazy``).
"""
