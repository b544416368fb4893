"""Django settings for Loreweave.

Every value that differs between machines comes from the environment, read
here and nowhere else. With no variables set the product runs on its embedded
default: a SQLite file, Celery in eager mode and in-process vector search.

- ``DATABASE_URL=postgres://...``    PostgreSQL with the ``vector`` extension
- ``CELERY_BROKER_URL=redis://...``  a real broker and separate Celery workers
- ``DEBUG=false``                    production: ``SECRET_KEY`` and
                                     ``ALLOWED_HOSTS`` become required
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import dj_database_url
from django.core.exceptions import ImproperlyConfigured
from kombu import Queue

BASE_DIR = Path(__file__).resolve().parent.parent


def _env_bool(name: str, default: bool) -> bool:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    value = raw.strip().lower()
    if value in {"1", "true", "yes", "on"}:
        return True
    if value in {"0", "false", "no", "off"}:
        return False
    raise ImproperlyConfigured(f"{name} must be true or false, not {raw!r}")


def _env_list(name: str, default: list[str]) -> list[str]:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    return [item.strip() for item in raw.split(",") if item.strip()]


def _env_int(name: str, default: int) -> int:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        return int(raw)
    except ValueError as exc:
        raise ImproperlyConfigured(f"{name} must be an integer, not {raw!r}") from exc


# --- core -------------------------------------------------------------------
DEBUG = _env_bool("DEBUG", True)

if DEBUG:
    # Development only: a fixed key is fine when nothing is exposed.
    SECRET_KEY = os.environ.get("SECRET_KEY") or "loreweave-dev-insecure-key-" + "x" * 40
    ALLOWED_HOSTS = _env_list("ALLOWED_HOSTS", ["localhost", "127.0.0.1", "[::1]", "testserver"])
else:
    SECRET_KEY = os.environ.get("SECRET_KEY", "")
    if len(SECRET_KEY) < 50:
        raise ImproperlyConfigured("SECRET_KEY must be set (50+ characters) when DEBUG is false")
    ALLOWED_HOSTS = _env_list("ALLOWED_HOSTS", [])
    if not ALLOWED_HOSTS:
        raise ImproperlyConfigured("ALLOWED_HOSTS must be set when DEBUG is false")

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "drf_spectacular",
    "drf_spectacular_sidecar",  # Swagger UI and Redoc served from our static files: the docs work offline
    "csp",  # the pages' Content-Security-Policy (django-csp)
    "corsheaders",  # CORS for browser partners; the policy is lore_platform.tenancy.cors
    "lore_platform.tenancy",
    "cast",
    "books",
    "retrieval.adapter",  # label "retrieval": the engine's Django side (world index, loading, lookup)
    "sharing",
    "jobs",
    "config.demo",
    "web",
    "js_lib_htmx",  # ships htmx.min.js as a static file (pinned in pyproject.toml)
]

MIDDLEWARE = [
    # Outermost: JSON errors under /api/ and /healthz for whatever the layers below answer or raise.
    "lore_platform.api.middleware.ApiErrorMiddleware",
    # CORS (django-cors-headers): answers preflights before anything authenticates; per-tenant origins;
    # above the 503 below so a partner's page can read that answer too.
    "lore_platform.tenancy.cors.TenantCorsMiddleware",
    # A database that cannot be reached is a fast 503 (before the 500 the layer above would give).
    "lore_platform.faults.DatabaseUnavailableMiddleware",
    "django.middleware.security.SecurityMiddleware",
    # Content-Security-Policy on every answer (django-csp; the policy below, the docs pages' in config/urls.py).
    "csp.middleware.CSPMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    # The pages speak the reader's language (Spanish or English); the API answers in English.
    "django.middleware.locale.LocaleMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "config.urls"
WSGI_APPLICATION = "config.wsgi.application"
ASGI_APPLICATION = "config.asgi.application"

TEMPLATES = [
    {
        # Django's, repairing text stored before the text check so one row never fails a page (issue 26).
        "BACKEND": "web.templating.RepairingTemplates",
        "DIRS": [],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "web.context.web",
            ],
        },
    },
]

# --- database ---------------------------------------------------------------
DATA_DIR = Path(os.environ.get("LOREWEAVE_DATA_DIR", BASE_DIR / "var"))
DATABASE_URL = os.environ.get("DATABASE_URL", "")
if DATABASE_URL:
    DATABASES = {"default": dj_database_url.parse(DATABASE_URL, conn_max_age=60, conn_health_checks=True)}
    if DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql":
        # The same backend, with a health check that reads the socket instead of sending SELECT 1.
        DATABASES["default"]["ENGINE"] = "lore_platform.postgres"
    # Database down: fail within a second (503, ``lore_platform.faults``), not after the OS's TCP
    # timeout. Web processes (deploy/gunicorn.conf.py) also cap each statement at the request
    # deadline; migrations and workers keep no cap unless this is set.
    DATABASES["default"].setdefault("OPTIONS", {})["connect_timeout"] = _env_int("DATABASE_CONNECT_TIMEOUT", 1)
    if _env_int("DATABASE_STATEMENT_TIMEOUT_MS", 0):
        DATABASES["default"]["OPTIONS"]["options"] = (
            f"-c statement_timeout={_env_int('DATABASE_STATEMENT_TIMEOUT_MS', 0)}"
        )
    if _env_bool("DATABASE_PREPARED_STATEMENTS", True):
        # Server-side binding lets psycopg prepare the statements a turn repeats; PostgreSQL then
        # skips planning them (~1 ms for the attachment join; ~4 ms of a ~27 ms turn, measured).
        # Set false behind PgBouncer in transaction mode, which cannot keep prepared statements.
        DATABASES["default"].setdefault("OPTIONS", {}).update({"server_side_binding": True, "prepare_threshold": 2})
else:
    DATA_DIR.mkdir(parents=True, exist_ok=True)
    DATABASES = {
        "default": {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": str(DATA_DIR / "loreweave.sqlite3"),
            # Several web threads + eager Celery share one file: wait instead of failing.
            "OPTIONS": {"timeout": 20, "transaction_mode": "IMMEDIATE"},
        }
    }
# /healthz reports "degraded" when the data directory has less free space than this (issue 26, point 7).
HEALTH_MIN_FREE_BYTES = _env_int("LOREWEAVE_HEALTH_MIN_FREE_MB", 512) * 1024 * 1024
DATABASE_IS_POSTGRES = DATABASES["default"]["ENGINE"].endswith(("postgresql", "postgis", "lore_platform.postgres"))

# Vector search: pgvector on PostgreSQL, an in-process index on SQLite.
VECTOR_BACKEND = "pgvector" if DATABASE_IS_POSTGRES else "memory"
# The sentence-embedding model (shipped in a PyPI package); its name is stored with every vector.
LOREWEAVE_EMBEDDER = os.environ.get("LOREWEAVE_EMBEDDER", "").strip() or "use-multilingual-v3"

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
AUTH_USER_MODEL = "tenancy.User"

# The password check limits failed sign-ins per account and per address (issue 26).
AUTHENTICATION_BACKENDS = ["lore_platform.tenancy.backends.ThrottledModelBackend"]

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]

LANGUAGE_CODE = "en"
LANGUAGES = [("en", "English"), ("es", "Español")]
LOCALE_PATHS = [BASE_DIR / "web" / "locale"]
LOGIN_URL = "web-login"
LOGIN_REDIRECT_URL = "web-books"
LOGOUT_REDIRECT_URL = "web-library"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = Path(os.environ.get("STATIC_ROOT", DATA_DIR / "static"))

# --- Celery -----------------------------------------------------------------
CELERY_BROKER_URL = os.environ.get("CELERY_BROKER_URL", "")
CELERY_TASK_ALWAYS_EAGER = not CELERY_BROKER_URL
CELERY_TASK_EAGER_PROPAGATES = True
# `make run` uses kombu's filesystem transport under ./var: a real worker beside the web server,
# with no broker service to install (scripts/run.sh). It keeps no results.
CELERY_BROKER_TRANSPORT_OPTIONS: dict[str, object] = {}
if CELERY_BROKER_URL.startswith("filesystem://"):
    _queue_dir = DATA_DIR / "broker" / "queue"
    _queue_dir.mkdir(parents=True, exist_ok=True)
    # kombu keeps its exchange tables in ./control unless told: under var/ with the queue, never in the tree.
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "data_folder_in": str(_queue_dir),
        "data_folder_out": str(_queue_dir),
        "control_folder": str(DATA_DIR / "broker" / "control"),
    }
CELERY_RESULT_BACKEND = os.environ.get(
    "CELERY_RESULT_BACKEND", CELERY_BROKER_URL if CELERY_BROKER_URL.startswith("redis") else None
)
CELERY_TASK_ACKS_LATE = True  # tasks are idempotent; a worker crash re-runs them
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_DEFAULT_QUEUE = "loreweave"
# AI jobs have their own queue (issue 33): a job holds its worker for minutes of model calls, and
# indexing, usage counts and translations must not wait behind it. A worker started without -Q
# serves both; the embedded default (scripts/run.sh) and production run one worker per queue.
JOBS_QUEUE = "loreweave.jobs"
CELERY_TASK_QUEUES = (Queue(CELERY_TASK_DEFAULT_QUEUE), Queue(JOBS_QUEUE))
CELERY_TASK_ROUTES = {"jobs.job_run": {"queue": JOBS_QUEUE}}
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
# A request that publishes a task while the broker is down waits at most ~100 ms (issue 13): no
# publish retries and short connect timeouts; ``lore_platform.tasks.task_publish`` then skips the
# broker for a few seconds and the sweeps below do the work from its database record. Workers keep
# retrying their own connection forever (celery 5.6: 5.7.0 exits when a drop finds unacked tasks).
BROKER_PUBLISH_TIMEOUT = float(os.environ.get("BROKER_PUBLISH_TIMEOUT", "0.1"))
CELERY_BROKER_CONNECTION_TIMEOUT = BROKER_PUBLISH_TIMEOUT
CELERY_BROKER_CONNECTION_MAX_RETRIES = None
# max_retries 0: a publisher's connection is tried once (kombu would retry 3 times over ~2 s); a worker
# retries its own connection by broker_connection_max_retries.
if CELERY_BROKER_URL.startswith("redis"):
    CELERY_BROKER_TRANSPORT_OPTIONS = {"socket_connect_timeout": BROKER_PUBLISH_TIMEOUT, "max_retries": 0}
# No task result is read on a request (tasks report through their rows); a result subscription
# would be one more Redis round trip per publish.
CELERY_TASK_IGNORE_RESULT = True
CELERY_TASK_PUBLISH_RETRY = False
CELERY_REDIS_SOCKET_CONNECT_TIMEOUT = BROKER_PUBLISH_TIMEOUT
# Periodic sweeps (celery beat): entries left pending by a lost task get indexed.
# Days a request log is kept (C-15); 0 keeps every log. Big keyword books store ~15 KB per turn.
REQUEST_LOG_RETENTION_DAYS = _env_int("REQUEST_LOG_RETENTION_DAYS", 0)

CELERY_BEAT_SCHEDULE = {
    # Every 30 s (entries pending past the sweep's grace: a lost task, a broker outage). A worker also
    # runs it with no grace, with the jobs sweep, whenever its consumer connects or reconnects to the
    # broker (config.celery): what a dead worker or an outage left behind moves within seconds.
    "retrieval-index-sweep": {"task": "retrieval.index_pending_sweep", "schedule": 30.0},
    # AI jobs whose message is gone or whose worker died (issue 33): re-queued, taken over or failed.
    "jobs-sweep": {"task": "jobs.jobs_sweep", "schedule": 15.0},
    "sharing-shared-books-sweep": {"task": "sharing.shared_books_sweep", "schedule": 300.0},
    # Turns start it too (at most once a second per process); this catches the last turns of a burst.
    "cast-request-usage-sweep": {"task": "cast.request_usage_sweep", "schedule": 30.0},
    "cast-request-logs-prune": {"task": "cast.request_logs_prune", "schedule": 3600.0},
    # Idempotency-Key answers are kept 24 h (issue 27); an expired one is also freed when its key returns.
    "tenancy-idempotency-keys-prune": {"task": "tenancy.idempotency_keys_prune", "schedule": 3600.0},
}

# --- sharing: translation for display (P-4) ---------------------------------
LOREWEAVE_DISPLAY_LANGUAGES = _env_list("LOREWEAVE_DISPLAY_LANGUAGES", ["en", "es"])
LOREWEAVE_TRANSLATION_PACKAGES_DIR = Path(
    os.environ.get("LOREWEAVE_TRANSLATION_PACKAGES_DIR") or DATA_DIR / "translation-packages"
)

# --- AI jobs (A-1..A-3): any OpenAI-compatible chat-completions server ---------------
# No base URL or model: generate answers "no model configured" and split uses the deterministic
# splitter. A tenant admin may choose among the operator's endpoints (MODEL_ENDPOINTS below) and
# set the model name and key for the tenant (PUT /api/v1/jobs/model).
LOREWEAVE_LLM_BASE_URL = os.environ.get("LOREWEAVE_LLM_BASE_URL", "").strip()
LOREWEAVE_LLM_API_KEY = os.environ.get("LOREWEAVE_LLM_API_KEY", "").strip()
LOREWEAVE_LLM_MODEL = os.environ.get("LOREWEAVE_LLM_MODEL", "").strip()
LOREWEAVE_LLM_TIMEOUT = float(os.environ.get("LOREWEAVE_LLM_TIMEOUT", "120"))
LOREWEAVE_LLM_MAX_RETRIES = _env_int("LOREWEAVE_LLM_MAX_RETRIES", 3)
LOREWEAVE_LLM_RETRY_AFTER_MAX = float(os.environ.get("LOREWEAVE_LLM_RETRY_AFTER_MAX", "30"))
# false: never send a JSON schema in response_format (servers that misbehave on it).
LOREWEAVE_LLM_STRUCTURED = _env_bool("LOREWEAVE_LLM_STRUCTURED", True)
# The longest answer asked for, in tokens (max_tokens on every request; 0 sends none).
LOREWEAVE_LLM_MAX_TOKENS = _env_int("LOREWEAVE_LLM_MAX_TOKENS", 4096)
# Times generate asks the model (the first answer and its bounded re-asks).
LOREWEAVE_GENERATE_ATTEMPTS = _env_int("LOREWEAVE_GENERATE_ATTEMPTS", 3)
# Split with a model: notes are cut at section boundaries into chunks of at most this many characters.
LOREWEAVE_SPLIT_CHUNK_CHARS = _env_int("LOREWEAVE_SPLIT_CHUNK_CHARS", 8_000)
# Per tenant: jobs queued or running at once, and jobs started in any 24 hours.
LOREWEAVE_JOBS_CONCURRENT = _env_int("LOREWEAVE_JOBS_CONCURRENT", 2)
LOREWEAVE_JOBS_PER_DAY = _env_int("LOREWEAVE_JOBS_PER_DAY", 50)
# A running job's lease (seconds): its worker renews it while it works; the jobs sweep (every 15 s)
# takes over a job whose lease lapsed (the worker died), so a dead worker's job moves on within a minute.
LOREWEAVE_JOB_LEASE_SECONDS = _env_int("LOREWEAVE_JOB_LEASE_SECONDS", 30)
# A queued job whose message was sent longer ago than this is sent again (a broker outage, a lost message).
LOREWEAVE_JOB_REQUEUE_SECONDS = _env_int("LOREWEAVE_JOB_REQUEUE_SECONDS", 60)
# Workers a job may lose before it fails ("the worker running it stopped") instead of being taken over.
LOREWEAVE_JOB_MAX_RUNS = _env_int("LOREWEAVE_JOB_MAX_RUNS", 3)

# --- where the server connects (issue 26, A-3; lore_platform/outbound.py) -------------------------
# A URL a tenant gives never reaches loopback, private, link-local, unique-local, multicast or cloud
# metadata addresses unless listed here: hosts, addresses or CIDRs, each optionally with :port
# (e.g. "127.0.0.1:8080,10.0.0.0/8,llm.internal"). The operator's own model endpoints need no entry.
OUTBOUND_ALLOW = _env_list("OUTBOUND_ALLOW", [])
# The operator's model endpoints a tenant admin may choose from (besides LOREWEAVE_LLM_BASE_URL, the
# "default"): JSON, [{"name": "local", "base_url": "http://127.0.0.1:8080/v1", "model": "qwen",
# "api_key": "..."}], or "name=url" pairs separated by commas.
MODEL_ENDPOINTS = os.environ.get("MODEL_ENDPOINTS", "").strip()
# true: a tenant admin may also give the URL of a model server of its own (then checked by the rule
# above, on save and on every connection). false (default): only the operator's endpoints.
MODEL_TENANT_ENDPOINTS = _env_bool("MODEL_TENANT_ENDPOINTS", False)

# --- API --------------------------------------------------------------------
# Seconds a web process trusts a key it verified (0: check the database every call). A revoked
# key stops working at once in the process that revoked it, and within this time everywhere.
API_KEY_CACHE_SECONDS = _env_int("API_KEY_CACHE_SECONDS", 10)

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "lore_platform.tenancy.authentication.ApiKeyAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["lore_platform.tenancy.permissions.IsTenantActor"],
    "DEFAULT_RENDERER_CLASSES": [
        "lore_platform.api.renderers.FastJSONRenderer",
    ],
    # JSON only; upload views name their multipart parser (books/api/io_views.py).
    "DEFAULT_PARSER_CLASSES": ["lore_platform.api.parsers.JSONBodyParser"],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "DEFAULT_PAGINATION_CLASS": "lore_platform.api.pagination.Pagination",
    "PAGE_SIZE": 50,
    "EXCEPTION_HANDLER": "lore_platform.api.errors.exception_handler",
    "DEFAULT_THROTTLE_CLASSES": ["lore_platform.api.throttling.TenantRateThrottle"],
    "DEFAULT_THROTTLE_RATES": {"tenant": os.environ.get("API_THROTTLE_RATE", "6000/min")},
    "UNAUTHENTICATED_USER": "django.contrib.auth.models.AnonymousUser",
}

SPECTACULAR_SETTINGS = {
    "TITLE": "Loreweave API",
    "DESCRIPTION": "Books of lore entries, and the per-turn context call that decides which lore reaches the model.",
    "VERSION": "1",
    "SERVE_INCLUDE_SCHEMA": False,
    "COMPONENT_SPLIT_REQUEST": True,
    # Two "role" choice sets (an entry's message role, a member's role) and one log detail set.
    "ENUM_NAME_OVERRIDES": {
        "RoleEnum": "books.models.Role",
        "MemberRoleEnum": "lore_platform.tenancy.models.Membership.Role",
        "LogDetailEnum": ["compact", "full"],
    },
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        "lore_platform.api.schema.error_responses_hook",
    ],
}

# --- Content-Security-Policy (issue 26): the pages load only this site's files --------------
# No inline script or style anywhere: page behaviour lives in web/static (htmx's indicator style is
# in site.css, base.html turns its own off). The API docs pages get a looser one (config/urls.py).
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": ["'self'"],
        "script-src": ["'self'"],
        "style-src": ["'self'"],
        "img-src": ["'self'", "data:"],  # data: for the empty favicon (base.html)
        "font-src": ["'self'"],
        "connect-src": ["'self'"],
        "object-src": ["'none'"],
        "base-uri": ["'self'"],
        "form-action": ["'self'"],
        "frame-ancestors": ["'none'"],
    },
}

# --- CORS for browser partners (P-6; the rule is in lore_platform/tenancy/cors.py) -------------
# Origins are per tenant (PUT /api/v1/tenant/cors); none is allowed here for all tenants.
CORS_URLS_REGEX = r"^/api/(v1|schema)/"
CORS_ALLOWED_ORIGINS: list[str] = []
CORS_ALLOW_CREDENTIALS = False  # keys travel in a header; cookies never cross origins
CORS_ALLOW_HEADERS = [
    "accept", "authorization", "content-type", "user-agent", "x-requested-with", "x-request-id",
    "if-match", "if-none-match", "idempotency-key",
]
CORS_EXPOSE_HEADERS = ["x-request-id", "retry-after", "content-disposition", "etag", "idempotent-replayed"]
# A preflight is remembered this long; what an origin may read is decided again on every call.
CORS_PREFLIGHT_MAX_AGE = 600

# Django's own body limit, above the JSON parser's (lore_platform/api/parsers.py) so that one speaks first.
DATA_UPLOAD_MAX_MEMORY_SIZE = 17 * 1024 * 1024

# The shared Redis of the web processes (the API throttle counts there, so every process spends
# one budget; Django's cache lives there too); process memory on the embedded default.
# CACHE_URL names it; without it a Redis broker's server is used (keys prefixed, Celery's untouched).
CACHE_KEY_PREFIX = "lw-cache"
CACHES: dict[str, dict[str, Any]]
CACHE_URL = os.environ.get("CACHE_URL", "") or (CELERY_BROKER_URL if CELERY_BROKER_URL.startswith("redis") else "")
if CACHE_URL:
    CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": CACHE_URL,
            "KEY_PREFIX": CACHE_KEY_PREFIX,
        }
    }
else:
    CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.locmem.LocMemCache",
            "LOCATION": "loreweave",
        }
    }
# Abuse limits (failed sign-ins, sign-ups, resets, invitations: lore_platform.tenancy.limits) must be
# counted across every web process: Redis when there is one, else files under the data folder
# (`make run` serves with several gunicorn workers, each with its own process memory).
CACHES["limits"] = dict(CACHES["default"]) if CACHE_URL else {
    "BACKEND": "django.core.cache.backends.filebased.FileBasedCache",
    "LOCATION": str(DATA_DIR / "cache" / "limits"),
    # Past MAX_ENTRIES the file cache deletes a share of its entries: high, so a flood of made-up
    # addresses cannot wash a lockout away.
    "OPTIONS": {"MAX_ENTRIES": 200_000},
}

# --- accounts: invitations, sign-up confirmation, abuse limits (issue 26) ---
# An invitation link works this many days, once; a sign-up's confirmation link this many hours.
INVITATION_DAYS = _env_int("INVITATION_DAYS", 7)
SIGNUP_CONFIRM_HOURS = _env_int("SIGNUP_CONFIRM_HOURS", 24)
# Failed sign-ins: this many per account (or per client address) within the window lock that
# account (address) out for LOGIN_LOCKOUT_SECONDS. Sign-ups: this many per address per window.
LOGIN_FAILURES_PER_ACCOUNT = _env_int("LOGIN_FAILURES_PER_ACCOUNT", 5)
LOGIN_FAILURES_PER_ADDRESS = _env_int("LOGIN_FAILURES_PER_ADDRESS", 20)
LOGIN_FAILURE_WINDOW_SECONDS = _env_int("LOGIN_FAILURE_WINDOW_SECONDS", 900)
LOGIN_LOCKOUT_SECONDS = _env_int("LOGIN_LOCKOUT_SECONDS", 900)
SIGNUPS_PER_ADDRESS = _env_int("SIGNUPS_PER_ADDRESS", 5)
SIGNUP_WINDOW_SECONDS = _env_int("SIGNUP_WINDOW_SECONDS", 3600)
# Password-reset mails per client address and per address mailed, per SIGNUP_WINDOW_SECONDS; a reset
# link works PASSWORD_RESET_TIMEOUT seconds (and once: it dies when the password changes).
PASSWORD_RESETS_PER_ADDRESS = _env_int("PASSWORD_RESETS_PER_ADDRESS", 5)
PASSWORD_RESETS_PER_ACCOUNT = _env_int("PASSWORD_RESETS_PER_ACCOUNT", 3)
PASSWORD_RESET_TIMEOUT = _env_int("PASSWORD_RESET_TIMEOUT", 7200)
# Invitations a tenant may send per day (each one mails an address its admin chose).
INVITATIONS_PER_TENANT_PER_DAY = _env_int("INVITATIONS_PER_TENANT_PER_DAY", 50)
# Behind n trusted reverse proxies, the client address is the n-th from the right of X-Forwarded-For.
CLIENT_ADDRESS_PROXIES = _env_int("CLIENT_ADDRESS_PROXIES", 0)
# Mail (invitations, sign-up confirmations, password resets): SMTP when EMAIL_HOST is set. Without it
# mail is written to files under the data folder, and the embedded default shows them at /mail to a
# browser on this machine (web.views.accounts.mail_outbox), so sign-up works offline.
EMAIL_HOST = os.environ.get("EMAIL_HOST", "")
EMAIL_BACKEND = os.environ.get("EMAIL_BACKEND", "") or (
    "django.core.mail.backends.smtp.EmailBackend" if EMAIL_HOST else "django.core.mail.backends.filebased.EmailBackend"
)
EMAIL_FILE_PATH = str(DATA_DIR / "mail")
# The local outbox page: only with file mail, in DEBUG (the embedded default), to loopback clients.
MAIL_OUTBOX_PAGE = DEBUG and EMAIL_BACKEND.endswith("filebased.EmailBackend")
EMAIL_PORT = _env_int("EMAIL_PORT", 587)
EMAIL_HOST_USER = os.environ.get("EMAIL_HOST_USER", "")
EMAIL_HOST_PASSWORD = os.environ.get("EMAIL_HOST_PASSWORD", "")
EMAIL_USE_TLS = _env_bool("EMAIL_USE_TLS", True)
DEFAULT_FROM_EMAIL = os.environ.get("DEFAULT_FROM_EMAIL", "Loreweave <noreply@localhost>")

# --- production security (clean `manage.py check --deploy`) ----------------
if not DEBUG:
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    SECURE_SSL_REDIRECT = _env_bool("SECURE_SSL_REDIRECT", True)
    SESSION_COOKIE_SECURE = True
    CSRF_COOKIE_SECURE = True
    SECURE_HSTS_SECONDS = _env_int("SECURE_HSTS_SECONDS", 31536000)
    SECURE_HSTS_INCLUDE_SUBDOMAINS = True
    SECURE_HSTS_PRELOAD = True
    SECURE_CONTENT_TYPE_NOSNIFF = True
    CSRF_TRUSTED_ORIGINS = _env_list("CSRF_TRUSTED_ORIGINS", [])
    # /healthz is probed over plain HTTP by load balancers.
    SECURE_REDIRECT_EXEMPT = [r"^healthz$"]

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": os.environ.get("LOG_LEVEL", "INFO")},
}
