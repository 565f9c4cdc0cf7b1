"""Benchmarks: each script prints its figures and writes bench/results/<name>.json.

Shared by them: ``bench.live`` (the live pipeline: worker and scripted-LLM processes, Kafka
waits, peak RSS, namespace cleanup) and ``bench.results_io`` (data and result paths, machine
facts, dates, targets, result writing). ``bench.query_index``, ``bench.query_quality`` and
``bench.query_drift`` are parts of ``bench/query.py`` (the first two also of
``bench/retrieval.py``).
"""
