"""emu/scenarios."""
