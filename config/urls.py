from csp.decorators import csp_update
from django.contrib import admin
from django.contrib.staticfiles.urls import staticfiles_urlpatterns
from django.urls import include, path
from drf_spectacular.views import (
    SpectacularAPIView,
    SpectacularRedocView,
    SpectacularSwaggerSplitView,
)

from config.health import healthz

api_v1 = [
    path("", include("lore_platform.tenancy.api.urls")),
    path("", include("books.api.io_urls")),
    path("", include("books.api.urls")),
    path("", include("backup.urls")),
    path("", include("cast.api.urls")),
    path("", include("sharing.api.urls")),
    path("", include("jobs.api.urls")),
]

# The API docs pages under the site's Content-Security-Policy, still with no inline script: Swagger UI
# and ReDoc set styles inline (their page templates carry a <style>, ReDoc's styled-components add more),
# draw with data: images and fonts, and ReDoc searches in a blob: worker. Nothing from another host.
docs_policy = csp_update({
    "style-src": ["'unsafe-inline'"],
    "img-src": ["data:"],
    "font-src": ["data:"],
    "worker-src": ["'self'", "blob:"],
})

urlpatterns = [
    path("healthz", healthz, name="healthz"),
    path("api/v1/", include(api_v1)),
    path("api/schema/", SpectacularAPIView.as_view(permission_classes=[], authentication_classes=[]), name="schema"),
    path(
        "api/docs/",
        # The split view serves Swagger UI's start-up script as a file (?script), not inline.
        docs_policy(SpectacularSwaggerSplitView.as_view(url_name="schema", permission_classes=[],
                                                        authentication_classes=[])),
        name="api-docs",
    ),
    path(
        "api/redoc/",
        docs_policy(SpectacularRedocView.as_view(url_name="schema", permission_classes=[], authentication_classes=[],
                                                 template_name="web/api_redoc.html")),
        name="api-redoc",
    ),
    path("admin/", admin.site.urls),
    path("i18n/", include("django.conf.urls.i18n")),  # set_language: the pages' language switch
    path("", include("web.urls")),
]

# DEBUG only (the embedded default): the docs pages' Swagger UI/Redoc files (drf-spectacular-sidecar) from
# this process, so /api/docs/ works offline; in production the proxy serves /static/ (deploy/PRODUCTION.md).
urlpatterns += staticfiles_urlpatterns()
