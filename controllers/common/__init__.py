"""controllers/common."""
