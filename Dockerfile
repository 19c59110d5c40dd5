# drctl worker image: the CLI, the Temporal worker, and the chaos toolkit for drills.
FROM python:3.11-slim
RUN apt-get update && apt-get install -y --no-install-recommends haproxy \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /app
COPY pyproject.toml README.md ./
COPY drctl ./drctl
COPY workflows ./workflows
COPY activities ./activities
COPY experiments ./experiments
COPY config ./config
RUN pip install --no-cache-dir .
RUN useradd --system --uid 10001 drctl
USER drctl
ENV DRCTL_CONFIG=/etc/drctl/fleet.yaml
ENTRYPOINT ["drctl"]
CMD ["worker"]
