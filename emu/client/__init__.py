"""emu/client."""
