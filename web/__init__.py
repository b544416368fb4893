"""Web pages for people (issue 15): server-rendered Django templates with htmx.

The pages call the same services and selectors the API calls, never its views.
"""
