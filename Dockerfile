# syntax=docker/dockerfile:1
# gpufleet's image: `gpufleet serve` by default (the Helm chart in deploy/helm/gpufleet runs it).
#   docker build -t REGISTRY/gpufleet:TAG .
# Two stages: the first builds wheels of gpufleet and of every dependency; the second installs
# them from those wheels alone, so the image carries no build tools, compilers or pip cache.

# --build-arg EXTRAS=ray adds Ray, for the pods of a Ray cluster that runs policy studies
# (deploy/ray/raycluster.yaml, `gpufleet sweep --ray`).

FROM python:3.11-slim AS builder
ARG EXTRAS=""
WORKDIR /src
COPY pyproject.toml README.md ./
COPY src ./src
RUN pip install --no-cache-dir --upgrade pip \
 && pip wheel --no-cache-dir --wheel-dir /wheels ".${EXTRAS:+[$EXTRAS]}"

FROM python:3.11-slim
ARG EXTRAS=""
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    MPLCONFIGDIR=/tmp/matplotlib
# The wheels are mounted for the install only, never copied into a layer of the image.
RUN --mount=type=bind,from=builder,source=/wheels,target=/wheels \
    pip install --no-cache-dir --no-index --find-links=/wheels "gpufleet${EXTRAS:+[$EXTRAS]}" \
 && groupadd --gid 65532 gpufleet \
 && useradd --uid 65532 --gid 65532 --no-create-home --home-dir /nonexistent \
      --shell /usr/sbin/nologin gpufleet
USER 65532:65532
# /healthz, /readyz and /metrics of `gpufleet serve`.
EXPOSE 10251
ENTRYPOINT ["gpufleet"]
CMD ["serve"]
