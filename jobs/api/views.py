"""AI jobs API (A-1..A-3): thin views over ``jobs.services`` and ``selectors``.

Starting, cancelling, retrying and accepting need a write key; reading a job
needs the read scope. A member sees their own jobs, admins every job of the
tenant; anyone else's job is 404. The model settings are the admins'.
"""
from __future__ import annotations

from typing import Any

from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response

from jobs import selectors, services
from jobs.api.serializers import (
    AcceptIn,
    GenerateIn,
    JobOut,
    ModelSettingsIn,
    ModelSettingsOut,
    SplitIn,
    job_out,
)
from lore_platform.api.base import TenantAPIView
from lore_platform.api.inputs import validated
from lore_platform.api.pagination import PageParams, Pagination, page_of
from lore_platform.api.parsers import JSONBodyParser
from lore_platform.errors import PermissionDenied

ERROR = OpenApiResponse(description='`{"error": {"code", "message", "field", "rule", "details"}}`')
START_ERRORS = {400: ERROR, 401: ERROR, 403: ERROR, 409: ERROR, 422: ERROR, 429: ERROR}


def _job_response(job: Any, code: int = status.HTTP_200_OK) -> Response:
    return Response(job_out(job), status=code)


JobPageOut = page_of(JobOut, "JobPageOut")


@extend_schema(tags=["jobs"])
class JobListView(TenantAPIView):
    @extend_schema(responses={200: JobPageOut, 401: ERROR}, parameters=[PageParams], operation_id="jobs_list",
                   summary="The caller's AI jobs, newest first")
    def get(self, request: Request) -> Response:
        paginator = Pagination()
        page: list[Any] = paginator.paginate_queryset(selectors.jobs_visible(self.actor), request, view=self) or []
        return paginator.get_paginated_response([job_out(job, with_input=False) for job in page])


@extend_schema(tags=["jobs"])
class GenerateView(TenantAPIView):
    parser_classes = [JSONBodyParser]

    @extend_schema(
        request=GenerateIn, responses={202: JobOut, **START_ERRORS},
        summary="Generate a book with AI (A-1): a description → a draft of 4–16 entries",
        description="Needs a model (409 `no_model_configured`, A-3). 429 `too_many_jobs` past the tenant's "
        "concurrent or daily job limit, with `Retry-After`. Poll the job; accept its draft with "
        "`POST /jobs/{id}/accept`.",
    )
    def post(self, request: Request) -> Response:
        data = validated(GenerateIn, request.data)
        job = services.job_generate_start(
            actor=self.actor, description=data["description"], language=data.get("language") or None,
            titles=data.get("titles"), book_id=data.get("book"),
        )
        job.refresh_from_db()  # an eager task may have run it already
        return _job_response(job, status.HTTP_202_ACCEPTED)


@extend_schema(tags=["jobs"])
class SplitView(TenantAPIView):
    parser_classes = [JSONBodyParser]

    @extend_schema(
        request=SplitIn, responses={202: JobOut, **START_ERRORS},
        summary="Split text into entries (A-2): notes → self-contained entries",
        description="With no model configured the deterministic splitter runs (`model: deterministic`).",
    )
    def post(self, request: Request) -> Response:
        data = validated(SplitIn, request.data)
        job = services.job_split_start(actor=self.actor, text=data["text"])
        job.refresh_from_db()
        return _job_response(job, status.HTTP_202_ACCEPTED)


@extend_schema(tags=["jobs"])
class JobView(TenantAPIView):
    @extend_schema(responses={200: JobOut, 401: ERROR, 404: ERROR}, summary="One AI job: state, progress, draft, usage")
    def get(self, request: Request, job_id: int) -> Response:
        return _job_response(selectors.access_job(self.actor, job_id))


@extend_schema(tags=["jobs"])
class JobCancelView(TenantAPIView):
    @extend_schema(request=None, responses={200: JobOut, 401: ERROR, 403: ERROR, 404: ERROR, 409: ERROR},
                   summary="Cancel a queued or running job")
    def post(self, request: Request, job_id: int) -> Response:
        job = selectors.access_job(self.actor, job_id)
        return _job_response(services.job_cancel(actor=self.actor, job=job))


@extend_schema(tags=["jobs"])
class JobRetryView(TenantAPIView):
    @extend_schema(request=None, responses={202: JobOut, 401: ERROR, 403: ERROR, 404: ERROR, 409: ERROR, 429: ERROR},
                   summary="Run a failed or cancelled job again: a new start (429 with Retry-After past the "
                   "quotas) that reuses the usable model answers it has and asks again for the rest")
    def post(self, request: Request, job_id: int) -> Response:
        job = services.job_retry(actor=self.actor, job=selectors.access_job(self.actor, job_id))
        job.refresh_from_db()
        return _job_response(job, status.HTTP_202_ACCEPTED)


@extend_schema(tags=["jobs"])
class JobAcceptView(TenantAPIView):
    parser_classes = [JSONBodyParser]

    @extend_schema(
        request=AcceptIn, responses={201: OpenApiResponse(description="The import receipt (I-4)"), **START_ERRORS},
        summary="Accept all or some of a draft into a new book or an existing one (append/replace)",
        description="An import: every limit is checked first, all or nothing (I-3, W-12); the answer is its receipt.",
    )
    def post(self, request: Request, job_id: int) -> Response:
        data = validated(AcceptIn, request.data)
        job = selectors.access_job(self.actor, job_id)
        receipt = services.job_accept(
            actor=self.actor, job=job, entries=data.get("entries"), book=data.get("book"),
            title=data.get("title"), mode=data.get("mode", "append"),
        )
        return Response(receipt, status=status.HTTP_201_CREATED)


@extend_schema(tags=["jobs"])
class ModelSettingsView(TenantAPIView):
    parser_classes = [JSONBodyParser]

    def _admin_check(self) -> None:
        if not self.actor.is_admin:
            raise PermissionDenied("Only tenant admins see and change the model settings.", field="model")

    @extend_schema(responses={200: ModelSettingsOut, 401: ERROR, 403: ERROR},
                   summary="The model settings in force for this tenant (the key is never shown)")
    def get(self, request: Request) -> Response:
        self._admin_check()
        return Response(selectors.model_settings_describe(self.actor.tenant))

    @extend_schema(request=ModelSettingsIn,
                   responses={200: ModelSettingsOut, 400: ERROR, 401: ERROR, 403: ERROR, 422: ERROR},
                   summary="Choose this tenant's model among the operator's endpoints (blank = inherit)")
    def put(self, request: Request) -> Response:
        self._admin_check()
        data = validated(ModelSettingsIn, request.data)
        services.model_settings_set(actor=self.actor, **data)
        return Response(selectors.model_settings_describe(self.actor.tenant))
