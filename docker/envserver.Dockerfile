# The standalone environment server (OpenEnv protocol) for trainer nodes: the engine and its
# envserver extra only — no Django, no database.
#   docker build -f docker/envserver.Dockerfile -t coworkenv-envserver .
#   docker run -p 8000:8000 -e COWORKENV_ENV_TOKEN=... coworkenv-envserver            # the samples
#   docker run -p 8000:8000 -e COWORKENV_ENV_TOKEN=... -v $PWD/specs:/specs coworkenv-envserver /specs/*.json
FROM python:3.11-slim-bookworm

ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1

WORKDIR /app
RUN useradd --system --create-home --home-dir /home/coworkenv coworkenv \
    && pip install "jsonschema>=4.23" "jmespath>=1.0" "starlette>=0.40" "uvicorn>=0.30" "websockets>=13"

COPY apps/__init__.py apps/
COPY apps/environments/__init__.py apps/environments/
COPY apps/environments/engine apps/environments/engine
COPY samples samples

USER coworkenv
EXPOSE 8000
# A non-loopback bind needs a token: COWORKENV_ENV_TOKEN (or --token), or --open to serve openly.
ENTRYPOINT ["python", "-m", "apps.environments.engine", "serve", "--host", "0.0.0.0", "--port", "8000"]
CMD ["samples/acme-ops.json", "samples/finance-files.json", "samples/support-desk.json"]
