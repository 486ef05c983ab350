# A stand-in for prom/prometheus and prom/alertmanager of deploy/compose.yaml where no registry
# can be reached: Debian's packages (Prometheus 2.42, Alertmanager 0.25) on the base `make
# image` used; tests/compose/override.yaml gives each service its entrypoint. As upstream's
# images, it runs as nobody and owns the data directories the named volumes are mounted on.
ARG BASE
FROM ${BASE}
# Unpinned: the tests want what Debian ships today, as scripts/system-deps.sh installs it.
# hadolint ignore=DL3008
RUN apt-get update -qq \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
        prometheus prometheus-alertmanager >/dev/null \
    && rm -rf /var/lib/apt/lists/* \
    && mkdir -p /prometheus /alertmanager \
    && chown 65534:65534 /prometheus /alertmanager
USER 65534:65534
