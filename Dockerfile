# drctl worker image: the CLI, the Temporal worker, rclone and the Chaos Toolkit for drills. Runtime
# only: no dev-stack emulation (moto, kmock, HAProxy), no test tools, no compiler.
# Reproducible: the base image is pinned to a full version tag, Debian packages to their bookworm
# versions, and every Python package to requirements/worker.lock's versions and hashes
# (regenerate the lock as docs/worker-image.md says).
FROM python:3.11.14-slim-bookworm AS build
WORKDIR /src
COPY pyproject.toml README.md ./
COPY drctl ./drctl
COPY workflows ./workflows
COPY activities ./activities
RUN pip wheel --no-cache-dir --no-deps --wheel-dir /wheels .

FROM python:3.11.14-slim-bookworm
# Every executable the product starts (drctl/providers/executables.py; tests/test_worker_image.py
# checks this list): rclone moves model artifacts (replication, migration, the RPO check).
RUN apt-get update \
    && apt-get install -y --no-install-recommends rclone=1.60.1+dfsg-2+b5 ca-certificates \
    && rm -rf /var/lib/apt/lists/*
# A fixed uid and gid: the Kubernetes securityContext and the compose runtime-socket group name them.
RUN groupadd --system --gid 10001 drctl \
    && useradd --system --uid 10001 --gid 10001 --create-home --home-dir /home/drctl drctl
# The dependencies from the lock only, each checked against its hash; then drctl itself, whose own
# dependencies are already there (--no-deps: nothing is resolved at build time).
COPY requirements/worker.lock /tmp/worker.lock
RUN pip install --no-cache-dir --require-hashes --no-deps -r /tmp/worker.lock && rm /tmp/worker.lock
COPY --from=build /wheels /wheels
RUN pip install --no-cache-dir --no-deps /wheels/*.whl && rm -rf /wheels \
    && pip check
COPY experiments /app/experiments
COPY config /app/config
WORKDIR /app
USER 10001:10001
ENV DRCTL_CONFIG=/etc/drctl/fleet.yaml \
    PYTHONUNBUFFERED=1
ENTRYPOINT ["drctl"]
CMD ["worker"]
