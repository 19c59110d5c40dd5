# drctl worker image: the CLI, the Temporal worker, rclone and the Chaos Toolkit for drills. Runtime
# only: no dev-stack emulation (moto, kmock, HAProxy), no test tools, no compiler.
# Reproducible: the base image is pinned by tag and by digest (the multi-architecture index; how it
# is chosen and bumped: docs/worker-image.md), Debian packages to their bookworm versions, the build
# backend to requirements/build.lock and every runtime package to requirements/worker.lock, each
# with its hashes: nothing is fetched unpinned.
FROM python:3.11.14-slim-bookworm@sha256:65a93d69fa75478d554f4ad27c85c1e69fa184956261b4301ebaf6dbb0a3543d AS build
WORKDIR /src
# The build backend from its lock, then the wheel built without an isolated build environment
# (which would fetch the newest setuptools).
COPY requirements/build.lock /tmp/build.lock
RUN pip install --no-cache-dir --require-hashes --no-deps -r /tmp/build.lock
COPY pyproject.toml README.md ./
COPY drctl ./drctl
COPY workflows ./workflows
COPY activities ./activities
RUN pip wheel --no-cache-dir --no-deps --no-build-isolation --wheel-dir /wheels .

FROM python:3.11.14-slim-bookworm@sha256:65a93d69fa75478d554f4ad27c85c1e69fa184956261b4301ebaf6dbb0a3543d
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
