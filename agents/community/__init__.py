"""The community job: a debounced leader (``job``) that feeds graph changes to a long-lived
child process (``runner``), which folds them into its state (``state``), re-clusters, has the
stale reports and summaries written (``writers``, ``texts``), commits the graph version
(``commit``, with light commits from the child's ``inbox`` between its phases), and hands the
leader its events and headline digest (``events``, ``headlines``) in a ``result``."""
