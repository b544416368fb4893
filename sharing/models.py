"""Models of the sharing app."""
