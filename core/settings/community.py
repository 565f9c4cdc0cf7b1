"""Community job settings: when it runs, clustering, aliases, headlines, reports, tables."""

from __future__ import annotations

from pydantic import BaseModel, Field, model_validator


class CommunitySettings(BaseModel):
    debounce_s: float = Field(5.0, gt=0, description="Run after the graph is quiet this long")
    max_wait_s: float = Field(60.0, gt=0, description="Run at the latest this long after a change")
    max_cluster_size: int = Field(10, ge=2, description="Re-partition communities larger than this")
    seed: int = Field(0xDEADBEEF, description="Leiden seed")
    jaccard_threshold: float = Field(
        0.3, gt=0, le=1, description="Minimum member overlap for a community to keep its id"
    )
    materiality_threshold: float = Field(
        0.2, gt=0, le=1, description="Share of new evidence that makes a report stale"
    )
    membership_tolerance: float = Field(
        0.1,
        ge=0,
        lt=1,
        description="Member drift (Jaccard distance) a report tolerates before membership "
        "alone makes it stale; within it, new members count as unreflected evidence",
    )
    frontier_tolerance: float = Field(
        0.25,
        ge=0,
        lt=1,
        description="Share of its weighted degree an entity's links must change by (since it "
        "was last placed) before re-clustering may move it; below it the entity keeps its "
        "community, so a hub touched by every article does not reshuffle its neighbourhood "
        "(0: any change)",
    )
    drift_check_every: int = Field(
        10,
        ge=0,
        description="Every this many runs, compare the maintained clustering with a fresh one "
        "of the same graph (level-0 modularity); 0: never",
    )
    resolve_aliases: bool = Field(
        True,
        description="Resolve which entity names are one thing (acronyms, spellings, "
        "surnames; the aliases table) and cluster them together",
    )
    confirm_aliases: int = Field(
        20,
        ge=0,
        description="In LLM mode, alias decisions resting on weak evidence the model is asked "
        "to confirm per run, at most (each once; the rest wait for later runs); 0: never ask",
    )
    headlines_per_run: int = Field(
        10,
        ge=0,
        description="Headline events a community run publishes at most: the storylines that "
        "emerged or surged in the headline window, best first; 0: none",
    )
    headline_window_days: int = Field(
        3,
        ge=1,
        description="The days of document time, ending at the newest document, that headlines "
        "compare with everything before",
    )
    headline_min_documents: int = Field(
        3, ge=1, description="Documents in the headline window a storyline needs to be a headline"
    )
    headline_min_ratio: float = Field(
        1.5,
        gt=1.0,
        description="How many times what its earlier share of the news predicts a storyline's "
        "documents in the window must be to be a headline (one new in the window always is)",
    )
    headline_min_significance: float = Field(
        10.83,
        ge=0.0,
        description="How unlikely by chance a storyline's surge must be to be a headline: the "
        "Poisson likelihood-ratio statistic of its documents against expected (10.83: p < "
        "0.001); headlines are ranked by it",
    )
    headline_regrowth: float = Field(
        0.5,
        ge=0.0,
        description="A storyline headlined before is headlined again once its documents in the "
        "window have grown by this share since",
    )
    aliases_full_every: int = Field(
        20,
        ge=1,
        description="Every this many runs, resolve every name afresh rather than around what "
        "changed (refreshes decisions resting on which entities are hubs)",
    )
    rebalance_gap: float = Field(
        0.005,
        gt=0,
        lt=1,
        description="Relative modularity shortfall against a fresh clustering beyond which a "
        "run re-balances (frees every entity, warm-started)",
    )
    reports_per_run: int = Field(
        2000,
        ge=0,
        description="At most this many community reports regenerated per run; the others "
        "wait, oldest first, for the runs that follow at once (0: no limit). Bounds a run's "
        "time and memory after a burst of news or a re-balance",
    )
    child_regrowth: float = Field(
        1.25,
        ge=0,
        description="Replace the job's child process after a save once its resident memory "
        "has grown past this multiple of its size after its first save (and by "
        "``child_min_growth_mib`` at least): a run frees most of "
        "what it allocates but the process keeps it, fragmented; a new child loads the saved "
        "state with a compact heap and the retiring child's caches (0: never replace)",
    )
    child_min_growth_mib: float = Field(
        256.0,
        ge=0,
        description="Growth in MiB never worth a new child whatever ``child_regrowth`` says: "
        "a small graph's child (a few hundred MiB, most of it imports) would otherwise be "
        "replaced to give back tens of MiB",
    )
    keep_snapshots: int = Field(
        5,
        ge=1,
        description="Community runs whose graph versions stay readable, with the light "
        "commits between them (as-of questions reach back this far)",
    )
    compact_every: int = Field(
        20,
        ge=1,
        description="Graph-table maintenance (compaction of small files, dropping row "
        "versions older than retention, vacuum) once this many versions were committed: "
        "then each commit maintains one table",
    )
    fresh_commit_s: float = Field(
        1.0,
        ge=0,
        description="Between community runs, commit the rows of new articles (entities, "
        "relationships, text units, documents, claims) at most this long after they were "
        "merged, so they are searchable before the next run; 0: only runs commit",
    )
    report_max_tokens: int = Field(8000, ge=200, description="Token budget of a report context")
    summary_join_max_tokens: int = Field(
        200,
        ge=0,
        description="Description sets up to this many tokens are shown joined as they are; "
        "only longer ones are summarised by the LLM (0: always, as GraphRAG does)",
    )
    summary_new_share: float = Field(
        0.5,
        gt=0,
        le=10,
        description="Re-summarise a description set once its descriptions not yet summarised "
        "reach this share of the ones the summary was written from",
    )
    summary_max_age_s: float = Field(
        3600.0,
        gt=0,
        description="...or once a summary missing any new description is this old (wall time)",
    )
    report_batch_size: int = Field(
        5,
        ge=1,
        le=20,
        description="Reports of small communities written per LLM call (1: one call each)",
    )
    report_batch_context_tokens: int = Field(
        1500,
        ge=0,
        description="A community whose report context is at most this many tokens is small "
        "enough to share a call with others",
    )
    retry_base_s: float = Field(
        30.0, gt=0, description="First wait before a report or summary the LLM refused is retried"
    )
    retry_max_s: float = Field(
        3600.0, gt=0, description="Longest wait between retries of a refused report or summary"
    )
    stale_after_s: float = Field(
        300.0,
        gt=0,
        description="/healthz is degraded when graph changes are pending and the newest version "
        "is older than this",
    )

    @model_validator(mode="after")
    def _wait_after_debounce(self) -> CommunitySettings:
        if self.max_wait_s < self.debounce_s:
            raise ValueError(
                f"max_wait_s ({self.max_wait_s}) must be >= debounce_s ({self.debounce_s})"
            )
        return self
