# Image for the worker and the query service (used by docker-compose.yml's "app" profile).
FROM python:3.11-slim
WORKDIR /app
COPY pyproject.toml README.md ./
COPY kgrag kgrag
COPY streams streams
COPY agents agents
COPY core core
COPY offline offline
COPY graph graph
COPY query query
COPY prompts prompts
RUN pip install --no-cache-dir ".[export]"
ENV KGRAG_DATA_DIR=/data
CMD ["kgrag", "worker"]
