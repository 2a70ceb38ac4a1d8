# syntax=docker/dockerfile:1
# The casewatch image: `docker build -t REGISTRY/casewatch:0.1.0 .` (BuildKit), then set the
# chart's image.repository / image.tag. tests/test_dockerfile.py checks what can be checked
# without building it.

ARG PYTHON_IMAGE=python:3.11-slim-bookworm

# ---- build: the casewatch wheel and the wheels of its dependencies (all binary on PyPI, so no
# compiler is needed here either).
FROM ${PYTHON_IMAGE} AS build
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1
WORKDIR /src
COPY pyproject.toml README.md ./
COPY monitor/ monitor/
COPY consumers/ consumers/
RUN pip wheel --wheel-dir /wheels ".[postgres]"

# ---- runtime: the wheels installed into the system Python, no build tools, no caches.
FROM ${PYTHON_IMAGE} AS runtime
ENV PYTHONUNBUFFERED=1 PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1
RUN --mount=type=bind,from=build,source=/wheels,target=/wheels \
    pip install --no-index --find-links /wheels "casewatch[postgres]" \
    && groupadd --system --gid 10001 casewatch \
    && useradd --system --uid 10001 --gid 10001 --home-dir /data --no-create-home casewatch \
    && install -d -o 10001 -g 10001 /data
WORKDIR /data
USER 10001:10001
EXPOSE 9464
ENTRYPOINT ["casewatch"]
CMD ["run"]
