"""controllers."""
