"""The query service over HTTP (FastAPI): ``query.api.app.create_app`` builds it.

One module per job: ``app`` composes the parts; ``state`` holds what requests share (the
served index, the clients, the publisher); ``errors`` and ``middleware`` shape every answer
before a route runs; ``views`` turn results and records into JSON; ``routes_*`` are the
endpoints by area. Answering itself is ``query.engine``, which the CLI uses without HTTP.
"""
