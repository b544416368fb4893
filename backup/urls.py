from django.urls import path

from backup.api import TenantBackupView, TenantRestoreView

urlpatterns = [
    path("backup", TenantBackupView.as_view(), name="tenant-backup"),
    path("backup/restore", TenantRestoreView.as_view(), name="tenant-restore"),
]
