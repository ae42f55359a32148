# The standalone environment server (OpenEnv protocol) for trainer nodes: the engine's own
# distribution (engine/, coworkenv-engine) with its server extra — no Django, no database.
#   docker build -f docker/envserver.Dockerfile -t coworkenv-envserver .
#   docker run -p 8000:8000 -e COWORKENV_ENV_TOKEN=... coworkenv-envserver            # the samples
#   docker run -p 8000:8000 -e COWORKENV_ENV_TOKEN=... -v $PWD/specs:/specs coworkenv-envserver /specs/*.json
FROM python:3.11-slim-bookworm

ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1

WORKDIR /app
COPY engine /src/engine
RUN useradd --system --create-home --home-dir /home/coworkenv coworkenv \
    && pip install "/src/engine[server,re2]" && rm -rf /src/engine
COPY samples samples

USER coworkenv
EXPOSE 8000
# A non-loopback bind needs a token: COWORKENV_ENV_TOKEN (or --token), or --open to serve openly.
ENTRYPOINT ["coworkenv-env", "serve", "--host", "0.0.0.0", "--port", "8000"]
CMD ["samples/acme-ops.json", "samples/finance-files.json", "samples/support-desk.json"]
