"""The community job: a debounced leader (``job``) that feeds graph changes to a long-lived
child process (``runner``), which folds them into its state (``state``), re-clusters, and has
the stale reports and summaries written (``writers``)."""
