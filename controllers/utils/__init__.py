"""controllers/utils."""
