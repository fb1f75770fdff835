# syntax=docker/dockerfile:1
# The operator image: `make image`. No image is published and none can be pulled on our CI machines, so
# this recipe is built by users (and kind); issue 11's real-node tier builds the same content from Debian
# packages. Both: CPython 3.11, the dependencies of image.lock, user 65532, `appschedule run`.
#
# Pinned by tag; pin by digest too (python:3.11.14-slim-bookworm@sha256:...) where your registry policy asks.
ARG PYTHON_IMAGE=python:3.11.14-slim-bookworm

FROM ${PYTHON_IMAGE} AS build
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
COPY pyproject.toml README.md image.lock ./
COPY operator ./operator
RUN python -m venv /opt/appschedule \
 && /opt/appschedule/bin/pip install --constraint image.lock . \
 && /opt/appschedule/bin/pip uninstall --yes setuptools pip \
 && /opt/appschedule/bin/appschedule --help >/dev/null

FROM ${PYTHON_IMAGE}
LABEL org.opencontainers.image.title="appschedule-operator" \
      org.opencontainers.image.description="An app's scheduled tasks as CronJobs, every run keyed, missed and doubled runs reported" \
      org.opencontainers.image.licenses="Apache-2.0"
COPY --from=build /opt/appschedule /opt/appschedule
# HOME: the user has no passwd entry, so nothing else would give one (the chart sets it as well)
ENV PATH=/opt/appschedule/bin:$PATH \
    HOME=/tmp \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
# non-root, numeric (Pod Security "restricted" checks runAsNonRoot against a numeric user)
USER 65532:65532
WORKDIR /tmp
ENTRYPOINT ["appschedule"]
CMD ["run"]
