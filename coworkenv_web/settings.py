"""CoworkEnv settings: one module, driven by the environment.

With no environment variables at all this is the zero-setup local mode: SQLite and a
filesystem Celery broker under ``var/``, DEBUG on and a generated development secret.
``DATABASE_URL`` and ``CELERY_BROKER_URL`` switch to the team-server mode.
"""

from datetime import timedelta
from pathlib import Path

import django
from django.core.exceptions import ImproperlyConfigured

from coworkenv_web import api_settings
from coworkenv_web.env import (
    env_addresses,
    env_bool,
    env_choice,
    env_database,
    env_float,
    env_int,
    env_key_hosts,
    env_list,
    env_networks,
    env_secret,
    env_secret_key,
    env_str,
    env_tokenizers,
)

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(env_str("COWORKENV_VAR_DIR", str(BASE_DIR / "var")))

DEBUG = env_bool("DEBUG", True)

# Required on a server (DEBUG=false); the local mode keeps a generated one under var/, so
# sessions survive a restart.
SECRET_KEY = env_secret_key("SECRET_KEY", VAR_DIR / "dev-secret-key" if DEBUG else None)

ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", ["localhost", "127.0.0.1", "[::1]"] if DEBUG else [])
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", [])

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django.contrib.humanize",
    "django.forms",  # its widget templates, for FORM_RENDERER below
    "rest_framework",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "django_htmx",
    "axes",
    "apps.core",
    "apps.accounts",
    "apps.capabilities",
    "apps.environments",
    "apps.llm",
    "apps.synthesis",
    "apps.runs",
    "apps.curation",
    "apps.datasets",
    "apps.workspace",
    "apps.training",
    "apps.serving",
    "apps.experiments",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "apps.core.middleware.InputScreeningMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    "apps.accounts.middleware.LastProjectMiddleware",
    # Last, as django-axes asks: it turns a locked-out sign-in into the lockout page.
    "axes.middleware.AxesMiddleware",
]

ROOT_URLCONF = "coworkenv_web.urls"
WSGI_APPLICATION = "coworkenv_web.wsgi.application"
ASGI_APPLICATION = "coworkenv_web.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "apps.accounts.context_processors.projects",
            ],
            "builtins": ["django_htmx.templatetags.django_htmx"],
        },
    }
]
# Forms render through the project's templates, so templates/django/forms/errors/list/ul.html
# (error messages cut at 500 characters) replaces Django's own.
FORM_RENDERER = "django.forms.renderers.TemplatesSetting"

if django.VERSION < (6, 0):
    # Django 6.0 ships template partials ({% partialdef %}, "page.html#name"); before it,
    # the django-template-partials package provides the same syntax.
    INSTALLED_APPS.append("template_partials")
    TEMPLATES[0]["OPTIONS"]["builtins"].append("template_partials.templatetags.partials")

# SQLite: processes sharing the file wait for the write lock (``timeout``), and write-ahead
# logging with synchronous=NORMAL makes a commit an append instead of two fsyncs (each
# worker write cost tens of milliseconds without it); readers never wait for the writer.
_SQLITE_OPTIONS = {"timeout": 20, "transaction_mode": "IMMEDIATE"}
if env_bool("SQLITE_WAL", True):
    _SQLITE_OPTIONS["init_command"] = "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL"

_database = env_database(
    "DATABASE_URL",
    sqlite_options=_SQLITE_OPTIONS,
    conn_max_age=env_int("DATABASE_CONN_MAX_AGE", 60),
)
if _database:
    DATABASES = {"default": _database}
else:
    VAR_DIR.mkdir(parents=True, exist_ok=True)
    DATABASES = {
        "default": {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": VAR_DIR / "coworkenv.sqlite3",
            # The web server and the local worker write to the same file: wait for the lock.
            "OPTIONS": dict(_SQLITE_OPTIONS),
        }
    }

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# The cache holds the API throttle counters. Per process by default; with several web
# processes, CACHE_URL=redis://host:6379/2 shares it (Django's Redis backend).
_cache_url = env_secret("CACHE_URL")
CACHES = {
    "default": {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": _cache_url}
    if _cache_url
    else {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}
}

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
AUTHENTICATION_BACKENDS = [
    # django-axes first: it refuses a locked-out sign-in before the password is checked.
    "axes.backends.AxesStandaloneBackend",
    "django.contrib.auth.backends.ModelBackend",
]
# Sign-in throttling (django-axes): after AXES_FAILURE_LIMIT wrong passwords for one username
# from one address, that pair is locked out for AXES_COOLOFF_MINUTES (a success resets the
# count). Locked-out attempts get apps.accounts.views.locked_out (a page, HTTP 429).
AXES_FAILURE_LIMIT = env_int("AXES_FAILURE_LIMIT", 5)
AXES_COOLOFF_TIME = timedelta(minutes=env_int("AXES_COOLOFF_MINUTES", 15))
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True
AXES_LOCKOUT_CALLABLE = "apps.accounts.views.locked_out"
# The client address is REMOTE_ADDR. Behind reverse proxies, list their networks in
# TRUSTED_PROXIES (e.g. 10.0.0.0/8): from those, the API throttles take the nearest address in
# X-Forwarded-For that is not a proxy; from anywhere else X-Forwarded-For is ignored.
TRUSTED_PROXIES = env_addresses("TRUSTED_PROXIES")

LOGIN_URL = "accounts:login"
LOGIN_REDIRECT_URL = "accounts:home"
LOGOUT_REDIRECT_URL = "accounts:login"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = Path(env_str("STATIC_ROOT", str(VAR_DIR / "staticfiles")))
# The local mode serves the app under uvicorn (the ASGI application: /envs/ included), where
# nothing else serves static files: WhiteNoise finds them where they lie, as runserver would.
WHITENOISE_USE_FINDERS = DEBUG
WHITENOISE_AUTOREFRESH = DEBUG
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {
        "BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"
        if DEBUG
        else "whitenoise.storage.CompressedManifestStaticFilesStorage"
    },
}
# Attachments (images, PDFs of multimodal environments), stored by sha256: local files under
# ATTACHMENTS_ROOT by default; ATTACHMENTS_STORAGE=s3 puts them in an S3-compatible bucket
# through django-storages (pip install '.[s3]'; credentials from AWS_ACCESS_KEY_ID /
# AWS_SECRET_ACCESS_KEY or the instance role, as boto3 reads them).
ATTACHMENTS_STORAGE = env_choice("ATTACHMENTS_STORAGE", "filesystem", ("filesystem", "s3"))
if ATTACHMENTS_STORAGE == "filesystem":
    STORAGES["attachments"] = {
        "BACKEND": "django.core.files.storage.FileSystemStorage",
        "OPTIONS": {"location": env_str("ATTACHMENTS_ROOT", str(VAR_DIR / "attachments"))},
    }
else:
    _bucket = env_str("ATTACHMENTS_S3_BUCKET", "")
    if not _bucket:
        raise ImproperlyConfigured("ATTACHMENTS_STORAGE=s3 needs ATTACHMENTS_S3_BUCKET.")
    STORAGES["attachments"] = {
        "BACKEND": "storages.backends.s3.S3Storage",
        "OPTIONS": {
            "bucket_name": _bucket,
            "endpoint_url": env_str("ATTACHMENTS_S3_ENDPOINT_URL", "") or None,
            "region_name": env_str("ATTACHMENTS_S3_REGION", "") or None,
            "location": env_str("ATTACHMENTS_S3_PREFIX", "attachments"),
            "default_acl": None,
            "file_overwrite": False,
            "querystring_auth": True,
        },
    }
if DEBUG:
    STATIC_ROOT.mkdir(parents=True, exist_ok=True)  # whitenoise warns about a missing folder
MEDIA_ROOT = Path(env_str("MEDIA_ROOT", str(VAR_DIR / "media")))
MEDIA_URL = "media/"
DATA_UPLOAD_MAX_MEMORY_SIZE = env_int("DATA_UPLOAD_MAX_MEMORY_SIZE", 10 * 1024 * 1024)
FILE_UPLOAD_MAX_MEMORY_SIZE = DATA_UPLOAD_MAX_MEMORY_SIZE

# Security: relaxed only in the local mode.
SESSION_COOKIE_SECURE = not DEBUG
CSRF_COOKIE_SECURE = not DEBUG
# No script reads the CSRF cookie: pages send the token from the template (hx-headers).
CSRF_COOKIE_HTTPONLY = True
SECURE_SSL_REDIRECT = env_bool("SECURE_SSL_REDIRECT", not DEBUG)
SECURE_HSTS_SECONDS = env_int("SECURE_HSTS_SECONDS", 0 if DEBUG else 31536000)
SECURE_HSTS_INCLUDE_SUBDOMAINS = not DEBUG
SECURE_HSTS_PRELOAD = not DEBUG
SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
SECURE_CONTENT_TYPE_NOSNIFF = True
X_FRAME_OPTIONS = "DENY"

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": env_str("LOG_LEVEL", "INFO")},
    "loggers": {
        "django.db.backends": {"level": "WARNING"},
        # The openai client's HTTP layer logs every request at INFO; apps.llm logs retries.
        "httpx2": {"level": "WARNING"},
        "axes": {"level": "WARNING"},  # keeps lockouts (WARNING), not every failed attempt
        # Beat sends the sweepers every JOB_SWEEP_EVERY_S: a line for each received and
        # succeeded task would bury everything else. Failures still log (ERROR).
        "celery.worker.strategy": {"level": env_str("CELERY_TASK_LOG_LEVEL", "WARNING")},
        "celery.app.trace": {"level": env_str("CELERY_TASK_LOG_LEVEL", "WARNING")},
    },
}

# REST API: DRF's classes and drf-spectacular's schema are in coworkenv_web/api_settings.py.
# Rates per client: "user" per signed-in user or token, "anon" per address, and
# "token_failure": wrong API tokens per address, after which wrong ones from that address
# get HTTP 429 until the window passes (valid tokens still pass). Counters live in the
# default cache: on several web processes configure a shared one (CACHE_URL) so the limits
# hold across them.
REST_FRAMEWORK = {
    **api_settings.REST_FRAMEWORK,
    "DEFAULT_THROTTLE_RATES": {
        "user": env_str("API_THROTTLE_USER", "1200/min"),
        "anon": env_str("API_THROTTLE_ANON", "60/min"),
        "token_failure": env_str("API_THROTTLE_TOKEN_FAILURES", "10/min"),
    },
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"]
    + (["rest_framework.renderers.BrowsableAPIRenderer"] if DEBUG else []),
}
# The OpenAPI schema and its docs pages: public in the local mode, for signed-in users (or
# tokens) on a server unless this opens them.
API_DOCS_PUBLIC = env_bool("API_DOCS_PUBLIC", DEBUG)
SPECTACULAR_SETTINGS = api_settings.SPECTACULAR_SETTINGS

# Celery: job state lives in database rows, never in a result backend.
CELERY_BROKER_URL = env_secret("CELERY_BROKER_URL")
if not CELERY_BROKER_URL:
    BROKER_DIR = VAR_DIR / "broker"
    (BROKER_DIR / "queue").mkdir(parents=True, exist_ok=True)
    (BROKER_DIR / "processed").mkdir(parents=True, exist_ok=True)
    CELERY_BROKER_URL = "filesystem://"
    # kombu's filesystem transport, with messages written atomically (see its docstring).
    CELERY_BROKER_TRANSPORT = "coworkenv_web.broker:Transport"
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        # kombu's filesystem transport needs the in and out folders to be the same one.
        "data_folder_in": str(BROKER_DIR / "queue"),
        "data_folder_out": str(BROKER_DIR / "queue"),
        "processed_folder": str(BROKER_DIR / "processed"),
        "control_folder": str(BROKER_DIR / "control"),
        "store_processed": False,
        # How often an idle worker looks for new files (kombu's default is 1 s, which a
        # run batch paid on every hand-over to the next run).
        "polling_interval": float(env_str("CELERY_FILESYSTEM_POLL_S", "0.1")),
    }
else:
    CELERY_BROKER_TRANSPORT_OPTIONS = {}
CELERY_RESULT_BACKEND = None
CELERY_TASK_IGNORE_RESULT = True
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_TASK_SERIALIZER = "json"
CELERY_RESULT_SERIALIZER = "json"
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_DEFAULT_QUEUE = "default"
CELERY_TASK_ALWAYS_EAGER = env_bool("CELERY_TASK_ALWAYS_EAGER", False)
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_WORKER_HIJACK_ROOT_LOGGER = False

# Follow-up work across apps, started by the composing app (workspace): a lower app that
# reaches one of these points calls the named service inside its own transaction, so the
# follow-up commits with the fact that asked for it (or neither does, and the sweeper or a
# redelivered message gets there again). Lower apps know the point, never the app above.
FOLLOW_UPS = {
    "runs.teacher_batch_finished": "apps.workspace.services.teacher_batch_finished",
    "environments.validated": "apps.workspace.services.environment_validated",
}

# LLM client: retries of transient failures (connection, timeout, 429, 5xx) per request.
LLM_MAX_ATTEMPTS = env_int("LLM_MAX_ATTEMPTS", 4)
LLM_MAX_TOTAL_WAIT_S = env_int("LLM_MAX_TOTAL_WAIT_S", 180)  # sleeping between attempts
LLM_RETRY_AFTER_CAP_S = env_int("LLM_RETRY_AFTER_CAP_S", 60)  # longest Retry-After honoured
LLM_SLOT_WAIT_S = env_int("LLM_SLOT_WAIT_S", 900)  # longest wait for a free concurrency slot
# Where the per-endpoint concurrency limit lives: "redis" (a semaphore with leases, shared by
# every worker host; the default when the broker is Redis), "file" (lock files under
# COWORKENV_VAR_DIR, shared by the processes of one host; the default with SQLite, which is
# one host anyway) or "database" (slot rows; PostgreSQL without Redis).
# LLM_SLOT_REDIS_URL defaults to the broker's URL.
LLM_SLOT_REDIS_URL = env_secret("LLM_SLOT_REDIS_URL") or (
    CELERY_BROKER_URL if CELERY_BROKER_URL.startswith(("redis://", "rediss://")) else ""
)
LLM_SLOT_BACKEND = env_choice(
    "LLM_SLOT_BACKEND",
    "redis"
    if LLM_SLOT_REDIS_URL
    else "file"
    if DATABASES["default"]["ENGINE"].endswith("sqlite3")
    else "database",
    ("redis", "database", "file"),
)
if LLM_SLOT_BACKEND == "redis" and not LLM_SLOT_REDIS_URL:
    raise ImproperlyConfigured("LLM_SLOT_BACKEND=redis needs LLM_SLOT_REDIS_URL or a Redis broker.")

# Which origins (scheme + host + port) each API-key variable may be sent to; None: any. The
# local mode (DEBUG=true) sends keys anywhere by default; a server (DEBUG=false) sends none
# until the operator lists them, since an author could otherwise point an endpoint at their
# own host and receive the team's key. "any" opts a server out of that on purpose.
LLM_KEY_HOSTS = env_key_hosts("LLM_KEY_HOSTS", "any" if DEBUG else "")

# Model endpoints may only reach public addresses, plus these CIDR ranges (e.g. a lab vLLM:
# "10.1.2.3/32"; "none" for no exception). The local mode (DEBUG=true) allows loopback by
# default, where a user's own vLLM or Ollama listens; a server (DEBUG=false) allows nothing.
LLM_ALLOWED_NETWORKS = env_networks(
    "LLM_ALLOWED_NETWORKS", "127.0.0.0/8,::1/128" if DEBUG else "none"
)

# Tokenizers that count a dataset version's tokens (`tokenizers` library files on this
# server: a tokenizer.json, or a model directory holding one), by name; a dataset picks one,
# or gets DATASET_TOKENIZER_DEFAULT; with none, tokens are estimated (characters / 4).
DATASET_TOKENIZERS = env_tokenizers("DATASET_TOKENIZERS")
DATASET_TOKENIZER_DEFAULT = env_str("DATASET_TOKENIZER_DEFAULT", "")
if DATASET_TOKENIZER_DEFAULT and DATASET_TOKENIZER_DEFAULT not in DATASET_TOKENIZERS:
    raise ImproperlyConfigured(
        f"DATASET_TOKENIZER_DEFAULT={DATASET_TOKENIZER_DEFAULT!r} is not a name in "
        "DATASET_TOKENIZERS."
    )

# Background work never waits for a person. Every claimed unit (a job, a synthesis slot, a
# run) is renewed by its worker every JOB_STALE_AFTER_S / 4 seconds; one that has not been
# renewed for JOB_STALE_AFTER_S is presumed dead (its process was killed) and the sweeper,
# run by Celery beat every JOB_SWEEP_EVERY_S, sends it to the workers again. A unit whose
# worker died JOB_MAX_CLAIMS times while holding it (a task that gets killed for memory every
# time) is failed with a message instead of being retried forever.
JOB_STALE_AFTER_S = env_int("JOB_STALE_AFTER_S", 45, minimum=2)
JOB_SWEEP_EVERY_S = env_int("JOB_SWEEP_EVERY_S", 15, minimum=1)
# How often a working experiment looks again at its current stage's jobs.
EXPERIMENT_POLL_S = env_int("EXPERIMENT_POLL_S", 10)
# An active experiment nobody advanced for this long lost its message (a broker down at
# launch, a worker killed between two looks): the sweeper sends it again.
EXPERIMENT_STALLED_S = env_int("EXPERIMENT_STALLED_S", 120)
JOB_MAX_CLAIMS = env_int("JOB_MAX_CLAIMS", 5, minimum=1)
# A worker that finishes a run takes its batch's next run itself, without a trip through the
# broker, for up to RUN_LANE_MAX_S seconds; then it hands the next one to the queue (so other
# batches get their turn). 0 sends every run through the broker.
RUN_LANE_MAX_S = env_int("RUN_LANE_MAX_S", 300)
# Wall-clock budget (seconds) of one environment validation (coworkenv_engine's backstop
# behind its step and size caps): past it the report says validation_time_budget_exceeded.
VALIDATION_TIME_BUDGET_S = env_int("VALIDATION_TIME_BUDGET_S", 60, minimum=1)
# A run playing longer than this stores its transcript so far at each turn's end (one write
# per turn, for the run page and progress; 0: at every turn's end).
RUN_CHECKPOINT_EVERY_S = env_int("RUN_CHECKPOINT_EVERY_S", 5)
# Benchmarks: a file that every run appends its phase timings to (one JSON line each).
RUN_TIMINGS_FILE = env_str("RUN_TIMINGS_FILE", "")
# One schedule for every deployment: each app's sweeper, on the default queue. Several beat
# processes are harmless (a sweep takes each unit with a conditional UPDATE), they only sweep
# more often. A sweep still queued after a few periods is dropped (a newer one follows), so
# workers coming back after a long stop do not work through a backlog of sweeps.
_SWEEP_EXPIRES_S = float(max(JOB_STALE_AFTER_S, 4 * JOB_SWEEP_EVERY_S))
CELERY_BEAT_SCHEDULE = {
    f"sweep-{name}": {
        "task": task,
        "schedule": float(JOB_SWEEP_EVERY_S),
        "options": {"queue": "default", "expires": _SWEEP_EXPIRES_S},
    }
    for name, task in (
        ("jobs", "apps.core.tasks.sweep_jobs_task"),
        ("runs", "apps.runs.tasks.sweep_runs_task"),
        ("synthesis", "apps.synthesis.tasks.sweep_synthesis_task"),
        ("training", "apps.training.tasks.sweep_training_task"),
        ("model-servers", "apps.serving.tasks.sweep_model_servers_task"),
        ("experiments", "apps.experiments.tasks.sweep_experiments_task"),
    )
}
CELERY_BEAT_SCHEDULE_FILENAME = str(VAR_DIR / "celerybeat-schedule")

# Model servers (apps.serving), run on the gpu queue: vLLM where it is installed, else
# transformers serve (SERVING_ENGINE: auto, vllm or transformers), bound to SERVING_HOST
# (the worker's address the web and llm workers reach; a non-loopback one exposes the
# server to that network), stopped after SERVING_IDLE_TIMEOUT_S without a request.
SERVING_ROOT = Path(env_str("SERVING_ROOT", str(VAR_DIR / "serving")))
SERVING_ENGINE = env_choice("SERVING_ENGINE", "auto", ("auto", "vllm", "transformers"))
SERVING_HOST = env_str("SERVING_HOST", "127.0.0.1")
SERVING_DEVICE = env_choice("SERVING_DEVICE", "auto", ("auto", "cpu"))
SERVING_IDLE_TIMEOUT_S = env_int("SERVING_IDLE_TIMEOUT_S", 1800)
SERVING_START_TIMEOUT_S = env_int("SERVING_START_TIMEOUT_S", 900)
SERVING_MAX_CONCURRENCY = env_int("SERVING_MAX_CONCURRENCY", 4)
# the served endpoint's max_tokens: room for an agent's step, not for a small model's babble
SERVING_MAX_TOKENS = env_int("SERVING_MAX_TOKENS", 1024)
SERVING_POLL_S = env_float("SERVING_POLL_S", 2.0)

# Training (apps.training). Local jobs write under TRAINING_ROOT; the gpu-queue worker starts
# the entry point with `accelerate launch` (TRAINING_LAUNCHER=python runs it without accelerate)
# on TRAINING_NUM_PROCESSES processes, or as TRAINING_ACCELERATE_CONFIG (a DeepSpeed/FSDP
# config file) says. TRAINING_DEVICE: auto (GPU when /dev/nvidia0 exists), cpu or gpu.
TRAINING_ROOT = Path(env_str("TRAINING_ROOT", str(VAR_DIR / "training")))
TRAINING_LAUNCHER = env_choice("TRAINING_LAUNCHER", "accelerate", ("accelerate", "python"))
TRAINING_NUM_PROCESSES = env_int("TRAINING_NUM_PROCESSES", 1)
TRAINING_ACCELERATE_CONFIG = env_str("TRAINING_ACCELERATE_CONFIG", "")
TRAINING_DEVICE = env_choice("TRAINING_DEVICE", "auto", ("auto", "cpu", "gpu"))
# A running local job whose worker has not reported for this long is taken over (and resumed
# from its last checkpoint) by the next worker that starts or receives it.
TRAINING_STALE_S = env_int("TRAINING_STALE_S", 120)
# The environment servers (OpenEnv's protocol, apps/environments/serving.py): the ASGI app's
# /envs/<project-slug>/ mount and `manage.py envserver`, whose flags override these. At most
# ENVSERVER_MAX_SESSIONS sessions per project server (the next WebSocket gets
# CAPACITY_REACHED, the next HTTP reset 503); a session ends after ENVSERVER_IDLE_TIMEOUT_S
# seconds without a reset/step or ENVSERVER_MAX_LIFETIME_S seconds in all; the catalogue is
# read from the database again every ENVSERVER_REFRESH_S seconds (0: never).
ENVSERVER_MAX_SESSIONS = env_int("ENVSERVER_MAX_SESSIONS", 256, minimum=1)
ENVSERVER_IDLE_TIMEOUT_S = env_float("ENVSERVER_IDLE_TIMEOUT_S", 600.0, positive=True)
ENVSERVER_MAX_LIFETIME_S = env_float("ENVSERVER_MAX_LIFETIME_S", 3600.0, positive=True)
ENVSERVER_REFRESH_S = env_float("ENVSERVER_REFRESH_S", 60.0, minimum=0)
# One user (all of their tokens together) opens at most this many of a server's sessions
# (0: a quarter of ENVSERVER_MAX_SESSIONS, at least 1), so that one trainer cannot take them
# all; on a standalone server (no users) the limit is per token.
ENVSERVER_MAX_SESSIONS_PER_TOKEN = env_int("ENVSERVER_MAX_SESSIONS_PER_TOKEN", 0, minimum=0)
# The ASGI application's limit on a request body or WebSocket message (413 / close 1009):
# ENVSERVER_MAX_BODY_BYTES under /envs/ (a reset or a step is a few KB), ASGI_MAX_BODY_BYTES
# on every other route (an environment archive with its attachments is the largest).
ENVSERVER_MAX_BODY_BYTES = env_int("ENVSERVER_MAX_BODY_BYTES", 4 * 1024 * 1024, minimum=1)
ASGI_MAX_BODY_BYTES = env_int("ASGI_MAX_BODY_BYTES", 256 * 1024 * 1024, minimum=1)

# How often the openai backend polls the provider, in seconds.
TRAINING_POLL_S = float(env_str("TRAINING_POLL_S", "15"))
# The address cluster jobs (command backend) call back to; it must reach this server.
TRAINING_CALLBACK_BASE_URL = env_str("TRAINING_CALLBACK_BASE_URL", "http://127.0.0.1:8000")
# Command backend (docs/commands.md): the operator's templates (a JSON or YAML file; none:
# no command job can be launched), the PATH their commands get (nothing else of the
# worker's environment is passed on), the lowest project role that reads a command job's
# log, and how long a submitted job may go without a report before the sweep fails it.
TRAINING_COMMAND_TEMPLATES_FILE = env_str("TRAINING_COMMAND_TEMPLATES_FILE", "")
TRAINING_COMMAND_PATH = env_str("TRAINING_COMMAND_PATH", "/usr/local/bin:/usr/bin:/bin")
TRAINING_COMMAND_LOG_ROLE = env_choice(
    "TRAINING_COMMAND_LOG_ROLE", "reviewer", ("viewer", "author", "reviewer", "admin")
)
TRAINING_COMMAND_SILENT_S = env_int("TRAINING_COMMAND_SILENT_S", 3600)
# What one job may report (apps.training.services.reports): metric steps when the job has
# no step count of its own, and metric rows.
TRAINING_MAX_STEPS = env_int("TRAINING_MAX_STEPS", 1_000_000)
TRAINING_MAX_METRIC_ROWS = env_int("TRAINING_MAX_METRIC_ROWS", 100_000)
