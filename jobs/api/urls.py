from django.urls import path

from jobs.api.views import (
    GenerateView,
    JobAcceptView,
    JobCancelView,
    JobListView,
    JobRetryView,
    JobView,
    ModelSettingsView,
    SplitView,
)

urlpatterns = [
    path("jobs", JobListView.as_view(), name="jobs"),
    path("jobs/generate", GenerateView.as_view(), name="jobs-generate"),
    path("jobs/split", SplitView.as_view(), name="jobs-split"),
    path("jobs/model", ModelSettingsView.as_view(), name="jobs-model"),
    path("jobs/<int:job_id>", JobView.as_view(), name="job"),
    path("jobs/<int:job_id>/cancel", JobCancelView.as_view(), name="job-cancel"),
    path("jobs/<int:job_id>/retry", JobRetryView.as_view(), name="job-retry"),
    path("jobs/<int:job_id>/accept", JobAcceptView.as_view(), name="job-accept"),
]
