"""The ground every app stands on: tenancy (tenants, users, memberships, API keys and scoping), the
API's sealed base views and error answers, task retry and publishing, encoding and database helpers.

Nothing here imports an app above it (``.importlinter``).
"""
