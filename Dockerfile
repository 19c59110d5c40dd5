# drctl worker image: the CLI, the Temporal worker and the Chaos Toolkit for drills. Runtime only:
# no dev-stack emulation (moto, kmock, HAProxy), no test tools, no compiler.
FROM python:3.11-slim AS build
WORKDIR /src
COPY pyproject.toml README.md ./
COPY drctl ./drctl
COPY workflows ./workflows
COPY activities ./activities
RUN pip wheel --no-cache-dir --no-deps --wheel-dir /wheels .

FROM python:3.11-slim
# A fixed uid and gid: the Kubernetes securityContext and the compose runtime-socket group name them.
RUN groupadd --system --gid 10001 drctl \
    && useradd --system --uid 10001 --gid 10001 --create-home --home-dir /home/drctl drctl
COPY --from=build /wheels /wheels
# The wheel's own dependencies only (pyproject [project.dependencies]); extras stay out.
RUN pip install --no-cache-dir /wheels/*.whl && rm -rf /wheels
COPY experiments /app/experiments
COPY config /app/config
WORKDIR /app
USER 10001:10001
ENV DRCTL_CONFIG=/etc/drctl/fleet.yaml \
    PYTHONUNBUFFERED=1
ENTRYPOINT ["drctl"]
CMD ["worker"]
